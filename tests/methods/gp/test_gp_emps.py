"""EMPS (real data): identification of {one_mass, coulomb, viscous, gravity}."""

from __future__ import annotations

from pathlib import Path

import pytest

from methods.gp import GPSettings, IndividualSpec, as_arrays, identify
from schemas.drive import load_emps

EMPS = Path("/work/shared/data/emps/DATA_EMPS.mat")
# prismatic drive: per-recording nominals in kg, N s/m, N (bounds 50..200 %); tanh gain for m/s
SETTINGS = GPSettings(nominals={"J1": 100.0, "f_v": 200.0, "M_C": 20.0},
                      bounds={"M_G": (-20.0, 20.0)}, f_tanh=1000.0)  # fmt: skip
PUBLISHED = {"J1": 95.1089, "f_v": 203.5034, "M_C": 20.3935, "M_G": 3.1648}  # M_G = -offset


@pytest.fixture(scope="module")
def emps_fit():
    if not EMPS.exists():
        pytest.skip("EMPS data not available")
    data = as_arrays(load_emps(EMPS, decimate=10))
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    return identify(spec, data, SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["J1", "f_v", "M_C"])
def test_emps_mass_and_friction_within_10_percent(emps_fit, name):
    # published values are IDIM-LS (inverse model); ours is open-loop output error
    assert emps_fit.parameters[name] == pytest.approx(PUBLISHED[name], rel=0.10)


@pytest.mark.slow
@pytest.mark.xfail(reason="measured 11 % off (3.51 N vs 3.16 N); output-error vs IDIM-LS")
def test_emps_offset_within_10_percent(emps_fit):
    assert emps_fit.parameters["M_G"] == pytest.approx(PUBLISHED["M_G"], rel=0.10)

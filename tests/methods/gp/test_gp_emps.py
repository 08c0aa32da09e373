"""EMPS (real data): identification of {one_mass, coulomb, viscous, gravity} and the search."""

from __future__ import annotations

from pathlib import Path

import pytest

from methods.gp import GPSettings, IdentificationSettings, IndividualSpec, as_arrays, identify
from schemas.drive import load_emps

EMPS = Path("/work/shared/data/emps/DATA_EMPS.mat")
# prismatic drive: per-recording nominals in kg, N s/m, N (bounds 50..200 %); tanh gain for m/s;
# residual = velocity error + position error (relative weight 1, see methods.gp.evaluate)
IDENT = IdentificationSettings(position_weight=1.0, screen_nfev=0)
SETTINGS = GPSettings(nominals={"J1": 100.0, "f_v": 200.0, "M_C": 20.0},
                      bounds={"M_G": (-20.0, 20.0)}, f_tanh=1000.0, identification=IDENT)  # fmt: skip
PUBLISHED = {"J1": 95.1089, "f_v": 203.5034, "M_C": 20.3935, "M_G": 3.1648}  # M_G = -offset


@pytest.fixture(scope="module")
def emps_data():
    if not EMPS.exists():
        pytest.skip("EMPS data not available")
    return as_arrays(load_emps(EMPS, decimate=10))


@pytest.fixture(scope="module")
def emps_fit(emps_data):
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    return identify(spec, emps_data, SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["J1", "f_v", "M_C", "M_G"])
def test_emps_parameters_within_10_percent_of_published(emps_fit, name):
    # published values are IDIM-LS (inverse model); ours is open-loop output error on velocity
    # and position (measured: J1 -2.5 %, f_v -7.1 %, M_C +8.4 %, offset +6.0 %)
    assert emps_fit.parameters[name] == pytest.approx(PUBLISHED[name], rel=0.10)


@pytest.mark.slow
def test_emps_velocity_only_offset_is_off_by_11_percent(emps_data):
    # documents why the position residual is used: velocity-only output error gives 3.51 N
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    velocity_only = GPSettings(**{**SETTINGS.__dict__,
                                  "identification": IdentificationSettings(screen_nfev=0)})  # fmt: skip
    ev = identify(spec, emps_data, velocity_only)
    assert ev.parameters["M_G"] == pytest.approx(1.11 * PUBLISHED["M_G"], rel=0.02)

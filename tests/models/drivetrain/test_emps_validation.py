"""EMPS (real data): {one_mass, coulomb, viscous, gravity} identified on DATA_EMPS, simulated open
loop on both records (issue 12: position R^2 >= 0.99 on the validation record)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.drivetrain.gp import IndividualSpec, as_arrays, identify
from models.drivetrain.gp.presets import EMPS_PUBLISHED, emps_settings
from models.drivetrain.product import DriveModel, validate
from schemas.drive import emps_path, emps_pulses_path, load_emps

STRUCTURE = ("one_mass", "coulomb", "viscous", "gravity")
SETTINGS = emps_settings()
SETTINGS = replace(SETTINGS, identification=replace(SETTINGS.identification, screen_nfev=0))
#: the issue's target, the level of the published continuous-time neural models (Forgione &
#: Piga 2021: position R^2 above 0.99 on both records); not a number measured here
TARGET_R2 = 0.99


@pytest.fixture(scope="module")
def records():
    # shipped in data/emps (no skip: a fresh clone has them); the validation record with the
    # same decimation so that it lies on the model's grid (100 Hz)
    return {"estimation": load_emps(emps_path(), decimate=10),
            "validation": load_emps(emps_pulses_path(), decimate=10)}  # fmt: skip


@pytest.fixture(scope="module")
def models(records):
    data = as_arrays(records["estimation"])
    start = (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0))
    ev = identify(IndividualSpec(STRUCTURE, start), data, SETTINGS)
    identified = DriveModel.from_settings(ev.structure, ev.parameters, SETTINGS, data.dt)
    published = DriveModel.from_settings(STRUCTURE, EMPS_PUBLISHED, SETTINGS, data.dt)
    return {"identified": identified, "IDIM-LS": published}


@pytest.mark.slow
@pytest.mark.parametrize("record", ["estimation", "validation"])
def test_identified_model_reaches_position_r2_target_open_loop(records, models, record):
    model = models["identified"]
    assert model.units == "prismatic"  # the EMPS preset: N, m/s, m
    result = validate(model, records[record], source=record)
    # measured (benchmarks/emps_validation.py): 0.9987 estimation, 0.9956 validation
    assert result.metrics["position"]["r2"] >= TARGET_R2, result.summary()
    assert result.metrics["velocity"]["r2"] >= TARGET_R2, result.summary()


@pytest.mark.slow
@pytest.mark.parametrize("record", ["estimation", "validation"])
def test_output_error_fit_simulates_better_than_the_inverse_model_reference(
    records, models, record
):
    # the published IDIM-LS parameters fit the inverse model (force from measured motion);
    # ours minimise the simulated velocity and position error, so in open-loop simulation they
    # must do at least as well on both records (on the validation record this is out of sample
    # for both): an oracle independent of our numbers
    ours = validate(models["identified"], records[record]).metrics["position"]
    reference = validate(models["IDIM-LS"], records[record]).metrics["position"]
    assert ours["r2"] >= reference["r2"] and ours["rmse"] <= reference["rmse"]

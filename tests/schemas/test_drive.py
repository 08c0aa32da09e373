"""The drive-recording contract and the EMPS loader."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from schemas.drive import (
    EMPS_DEFAULT,
    EMPS_PULSES_DEFAULT,
    emps_path,
    emps_pulses_path,
    load_drive_recording,
    load_emps,
    validate_drive_recording,
)
from schemas.errors import DataError

EMPS = emps_path()


def _frame(n=50):
    rng = np.random.default_rng(0)
    return pd.DataFrame({"t_s": np.arange(n) * 1e-3, "torque_Nm": rng.normal(size=n),
                         "velocity_rad_s": rng.normal(size=n)})  # fmt: skip


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_round_trip_csv_and_parquet(tmp_path, suffix):
    path = tmp_path / f"rec{suffix}"
    frame = _frame()
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    loaded = load_drive_recording(path)
    np.testing.assert_allclose(loaded[frame.columns].to_numpy(), frame.to_numpy())


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.assign(t_s=f["t_s"][::-1].to_numpy()), "strictly increasing"),
        (lambda f: f.assign(t_s=f["t_s"] ** 1.5), "uniformly sampled"),
        (lambda f: f.assign(velocity_rad_s=f["velocity_rad_s"].where(f.index != 7)), "finite|null"),
        (lambda f: f.drop(columns="torque_Nm"), "torque_Nm"),
        (lambda f: f.head(5), "at least 10 rows"),
    ],
)
def test_violations_name_the_problem(mutate, message):
    with pytest.raises(DataError, match=message):
        validate_drive_recording(mutate(_frame()), source="rec.csv")


def test_emps_loader_units_and_decimation():
    full = load_emps(EMPS)
    assert len(full) == 24841
    small = load_emps(EMPS, decimate=10)
    assert len(small) == 2485 and np.diff(small["t_s"]).std() < 1e-9
    # force = gtau * vir [N]: tens to hundreds of newtons; velocity [m/s] well below 1
    assert 20 < small["torque_Nm"].abs().max() < 1000
    assert 0.01 < small["velocity_rad_s"].abs().max() < 1.0
    # the velocity integrates back to the measured position (zero-phase filter, no lag)
    pos = np.concatenate([[0], np.cumsum(full["velocity_rad_s"].to_numpy()[1:]) * 1e-3])
    drift = pos + full["position_rad"].iloc[0] - full["position_rad"].to_numpy()
    assert np.max(np.abs(drift)) < 2e-3


def test_emps_records_are_shipped_and_overridable(monkeypatch, tmp_path):
    assert EMPS_DEFAULT.is_file() and EMPS_PULSES_DEFAULT.is_file()
    assert EMPS_DEFAULT.parent.name == "emps" and EMPS_DEFAULT.parents[1].name == "data"
    monkeypatch.delenv("GREYLAB_EMPS_MAT", raising=False)
    monkeypatch.delenv("GREYLAB_EMPS_PULSES_MAT", raising=False)
    assert emps_path() == EMPS_DEFAULT and emps_pulses_path() == EMPS_PULSES_DEFAULT
    monkeypatch.setenv("GREYLAB_EMPS_MAT", str(tmp_path / "a.mat"))
    monkeypatch.setenv("GREYLAB_EMPS_PULSES_MAT", str(tmp_path / "b.mat"))
    assert emps_path() == tmp_path / "a.mat" and emps_pulses_path() == tmp_path / "b.mat"


def test_emps_validation_record_loads_with_the_same_loader():
    """DATA_EMPS_PULSES.mat (validation): same fields, same sampling as the estimation record."""
    estimation = load_emps(EMPS_DEFAULT, decimate=10)
    validation = load_emps(EMPS_PULSES_DEFAULT, decimate=10)
    assert len(validation) == len(estimation) == 2485
    assert np.diff(validation["t_s"]).std() < 1e-9
    assert 20 < validation["torque_Nm"].abs().max() < 1000
    assert 0.01 < validation["velocity_rad_s"].abs().max() < 1.0
    # a different recording (pulses injected into the loop), not a copy of the estimation one
    assert not np.allclose(validation["torque_Nm"], estimation["torque_Nm"])

"""Drive recordings: the table contract, its readers and the EMPS loader.

Columns: ``t_s`` [s] strictly increasing and uniform (every step within ``UNIFORM_RTOL``
= 1e-3 relative of the median step), ``torque_Nm`` (input), ``velocity_rad_s`` (output),
optional ``position_rad``; all finite floats of magnitude at most ``MAX_MAGNITUDE`` = 1e15
(beyond it squares and sums of the fits overflow: a measurement 1e300 is a unit or file
error); the sample time between ``MIN_DT`` = 1e-7 s (10 MHz) and ``MAX_DT`` = 1 s (``t_s`` is
in seconds: a recording in ms or ns is refused by name, it would ask for 1e6 RK4 substeps
per sample); at least 10 rows.

For a prismatic drive (EMPS) the columns keep their names but carry force [N] in
``torque_Nm``, velocity [m/s] in ``velocity_rad_s`` and position [m] in ``position_rad``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrors
from pandera.typing import Series

from schemas.errors import DataError, describe_failure_cases
from schemas.lab_files import read_limited

UNIFORM_RTOL = 1e-3
#: the EMPS benchmark records shipped in the project (`data/emps/README.md`): estimation
#: (`DATA_EMPS.mat`, `$GREYLAB_EMPS_MAT` overrides) and validation (`DATA_EMPS_PULSES.mat`,
#: `$GREYLAB_EMPS_PULSES_MAT` overrides)
EMPS_DIR = Path(__file__).resolve().parents[1] / "data" / "emps"
EMPS_DEFAULT = EMPS_DIR / "DATA_EMPS.mat"
EMPS_PULSES_DEFAULT = EMPS_DIR / "DATA_EMPS_PULSES.mat"
MIN_ROWS = 10
MAX_MAGNITUDE = 1e15
MIN_DT, MAX_DT = 1e-7, 1.0


class DriveRecording(pa.DataFrameModel):
    """A torque/velocity recording of a drive (see module docstring for units)."""

    t_s: Series[float] = pa.Field(nullable=False)
    torque_Nm: Series[float] = pa.Field(nullable=False)
    velocity_rad_s: Series[float] = pa.Field(nullable=False)
    position_rad: Series[float] | None = pa.Field(nullable=False)

    class Config:
        coerce = True
        strict = False

    @pa.dataframe_check(error="at least 10 rows are required")
    def enough_rows(cls, df: pd.DataFrame) -> bool:
        return len(df) >= MIN_ROWS

    @pa.dataframe_check(error="values must be finite (no NaN or inf)")
    def finite(cls, df: pd.DataFrame) -> pd.Series:
        cols = [c for c in ("t_s", "torque_Nm", "velocity_rad_s", "position_rad") if c in df]
        return pd.Series(np.isfinite(df[cols].to_numpy(float)).all(axis=1), index=df.index)

    @pa.check(
        "t_s", "torque_Nm", "velocity_rad_s", "position_rad",
        error=f"|value| must be at most {MAX_MAGNITUDE:g} (a measurement beyond it is a unit "
        "or file error)",
    )  # fmt: skip
    def magnitude(cls, values: pd.Series) -> pd.Series:
        return ~(values.abs() > MAX_MAGNITUDE)  # NaN/inf: the finite check reports them

    @pa.check(
        "t_s",
        error=f"t_s is in seconds: the sample time must be between {MIN_DT:g} and {MAX_DT:g} s "
        "(a larger step is a recording in ms or ns, a smaller one in ks)",
    )
    def sample_time(cls, t: pd.Series) -> pd.Series:
        step = t.diff()
        return step.isna() | ~(step > 0) | ((step >= MIN_DT) & (step <= MAX_DT))

    @pa.check("t_s", error="t_s must be strictly increasing")
    def increasing(cls, t: pd.Series) -> pd.Series:
        step = t.diff()
        return step.isna() | (step > 0)

    @pa.check(
        "t_s", error=f"t_s must be uniformly sampled (steps within {UNIFORM_RTOL:g} of the median)"
    )
    def uniform(cls, t: pd.Series) -> pd.Series:
        step = t.diff()
        median = float(step.median()) if len(t) > 1 else 0.0
        return step.isna() | ((step - median).abs() <= UNIFORM_RTOL * abs(median))


def validate_drive_recording(frame: pd.DataFrame, *, source: str = "table") -> pd.DataFrame:
    """Validate a DataFrame against :class:`DriveRecording`; DataError names every problem."""
    try:
        return DriveRecording.validate(frame, lazy=True)
    except SchemaErrors as exc:
        raise DataError(describe_failure_cases(exc.failure_cases, source=source)) from None
    except SchemaError as exc:  # pragma: no cover - non-lazy path
        raise DataError(f"{source}: {exc}") from None


def load_drive_recording(path: str | Path) -> pd.DataFrame:
    """Read a CSV/Parquet drive recording and validate it."""
    return validate_drive_recording(read_limited(path), source=str(path))


def emps_path() -> Path:
    """The EMPS estimation record: `$GREYLAB_EMPS_MAT` or the shipped `data/emps/DATA_EMPS.mat`."""
    return Path(os.environ.get("GREYLAB_EMPS_MAT") or EMPS_DEFAULT)


def emps_pulses_path() -> Path:
    """The EMPS validation record: `$GREYLAB_EMPS_PULSES_MAT` or `data/emps/DATA_EMPS_PULSES.mat`."""
    return Path(os.environ.get("GREYLAB_EMPS_PULSES_MAT") or EMPS_PULSES_DEFAULT)


def load_emps(mat_path: str | Path, *, decimate: int = 1, cutoff_hz: float = 20.0) -> pd.DataFrame:
    """An EMPS benchmark record (``DATA_EMPS.mat`` or ``DATA_EMPS_PULSES.mat``) as a recording.

    ``torque_Nm`` = force ``gtau * vir`` [N]; ``velocity_rad_s`` [m/s] from the motor position
    ``qm`` by a central difference followed by a zero-phase (forward-backward) 4th-order
    Butterworth low-pass at ``cutoff_hz``; ``position_rad`` = ``qm`` [m]. The force is filtered
    by the same low-pass so that input and output see the same delay-free smoothing.
    ``decimate`` keeps every k-th sample after filtering (cutoff must stay below the new
    Nyquist frequency), e.g. 10 -> 100 Hz, 2484 samples, an affordable search.
    """
    from scipy.io import loadmat
    from scipy.signal import butter, sosfiltfilt

    path = Path(mat_path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        mat = loadmat(path)
        t = np.asarray(mat["t"], float).ravel()
        qm = np.asarray(mat["qm"], float).ravel()
        force = float(np.asarray(mat["gtau"]).ravel()[0]) * np.asarray(mat["vir"], float).ravel()
    except (KeyError, ValueError, OSError) as exc:
        raise DataError(f"{path}: not an EMPS .mat file ({exc})") from None
    if decimate < 1:
        raise DataError(f"decimate must be >= 1, got {decimate}")
    dt = float(np.median(np.diff(t)))
    if not 0 < cutoff_hz < 0.5 / (dt * decimate):
        raise DataError(f"cutoff_hz must be in (0, {0.5 / (dt * decimate):g}) Hz")
    velocity = np.gradient(qm, dt)
    sos = butter(4, cutoff_hz, fs=1.0 / dt, output="sos")
    velocity = sosfiltfilt(sos, velocity)
    force_f = sosfiltfilt(sos, force)
    frame = pd.DataFrame(
        {"t_s": t, "torque_Nm": force_f, "velocity_rad_s": velocity, "position_rad": qm}
    ).iloc[::decimate]
    frame = frame.reset_index(drop=True)
    frame["t_s"] = frame["t_s"].iloc[0] + np.arange(len(frame)) * dt * decimate
    return validate_drive_recording(frame, source=str(path))

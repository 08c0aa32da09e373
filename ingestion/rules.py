"""Which study a file belongs to (by its columns), its campaign (by its name), validation.

The rules are stated in the `ingestion` package docstring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

import pandas as pd

from schemas.errors import DataError
from schemas.press import validate_press_table

PRESS_COLUMNS = ("series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um")
DRIVE_COLUMNS = ("t_s", "torque_Nm", "velocity_rad_s")
DRIVE_OPTIONAL = ("position_rad",)
DEFAULT_CAMPAIGN = "default"
SOURCE_COLUMN = "source_sha256"
_CAMPAIGN = re.compile(r"([a-z0-9-]{1,64})__.+", re.DOTALL)


class Study(StrEnum):
    press = "press"
    drive = "drive"


def classify(columns: Iterable[str], *, source: str = "table") -> Study:
    """The study a table belongs to, by its column names (rule in the module docstring)."""
    present = {str(c) for c in columns}
    required = {Study.press: PRESS_COLUMNS, Study.drive: DRIVE_COLUMNS}
    complete = [s for s, cols in required.items() if set(cols) <= present]
    if len(complete) == 1:
        return complete[0]
    if len(complete) == 2:
        raise DataError(
            f"{source}: ambiguous: has the columns of a press table {list(PRESS_COLUMNS)} "
            f"and of a drive recording {list(DRIVE_COLUMNS)}; split it into two files"
        )
    share = {s: len(set(cols) & present) / len(cols) for s, cols in required.items()}
    best = max(share, key=lambda s: share[s])
    if share[best] >= 0.5 and share[Study.press] != share[Study.drive]:
        return best
    raise DataError(
        f"{source}: neither a press measurement table (columns {list(PRESS_COLUMNS)}) nor a "
        f"drive recording (columns {list(DRIVE_COLUMNS)}, optional {list(DRIVE_OPTIONAL)}); "
        f"found columns {sorted(present)}"
    )


def campaign_of(name: str) -> str:
    """Campaign from `<campaign>__<anything>.<ext>`; `default` when the name does not match."""
    stem = name.rsplit(".", 1)[0] if "." in name else name
    match = _CAMPAIGN.fullmatch(stem)
    return match.group(1) if match else DEFAULT_CAMPAIGN


def validate(study: Study, frame: pd.DataFrame, *, source: str) -> pd.DataFrame:
    """Validate with the study's schema; raises `DataError` naming file, rows and fields."""
    if study is Study.press:
        return validate_press_table(frame, source=source)
    from schemas.drive import validate_drive_recording

    table = validate_drive_recording(frame, source=source)
    # One schema for every drive part: known columns only, `position_rad` null when absent.
    columns = list(DRIVE_COLUMNS + DRIVE_OPTIONAL)
    return table.reindex(columns=columns).astype(float).reset_index(drop=True)

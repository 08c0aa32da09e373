"""Which study a file belongs to (by its columns), its campaign (by its name), validation.

The rules are stated in the `ingestion` package docstring.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

import pandas as pd

from ingestion.names import CAMPAIGN_RULE
from schemas.errors import DataError
from schemas.press import validate_press_table

PRESS_COLUMNS = ("series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um")
DRIVE_COLUMNS = ("t_s", "torque_Nm", "velocity_rad_s")
DRIVE_OPTIONAL = ("position_rad",)
DEFAULT_CAMPAIGN = "default"
SOURCE_COLUMN = "source_sha256"
CAMPAIGN_SEPARATOR = "__"
_CAMPAIGN = re.compile(CAMPAIGN_RULE)
_QUOTE_LIMIT = 80


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


class CampaignNameError(DataError):
    """A file name with `__` whose campaign part breaks the campaign rule (quarantined)."""


def campaign_name_problem(campaign: str) -> str | None:
    """Why `campaign` is not a campaign name (`[a-z0-9-]{1,64}`), or None if it is one."""
    if _CAMPAIGN.fullmatch(campaign):
        return None
    if not campaign:
        return "it is empty"
    if len(campaign) > 64:
        return f"it has {len(campaign)} characters, at most 64 are allowed"
    bad = sorted({c for c in campaign if not _CAMPAIGN.fullmatch(c)})
    shown = [f"{c!r} (upper case)" if c.isupper() else repr(c) for c in bad[:5]]
    return f"it contains {', '.join(shown)}{', ...' if len(bad) > 5 else ''}, not allowed"


def _quoted(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= _QUOTE_LIMIT else shown[: _QUOTE_LIMIT - 4] + "...'"


def _suggestion(campaign: str) -> str | None:
    """A valid campaign close to `campaign` (lower case, other characters as `-`), if any."""
    text = re.sub(r"[^a-z0-9-]+", "-", campaign.lower()).strip("-")[:64]
    return text if text and _CAMPAIGN.fullmatch(text) else None


def campaign_of(name: str, *, source: str | None = None) -> str:
    """Campaign from `<campaign>__<anything>.<ext>` (the part before the first `__`);
    `default` when the name has no `__`.

    Raises `CampaignNameError` (a `DataError`, so the file is quarantined) when the name has
    `__` but its campaign part breaks the rule `[a-z0-9-]{1,64}`: such a name was meant to
    name a campaign and is never filed under `default` silently.
    """
    stem = name.rsplit(".", 1)[0] if "." in name else name
    if CAMPAIGN_SEPARATOR not in stem:
        return DEFAULT_CAMPAIGN
    campaign = stem.split(CAMPAIGN_SEPARATOR, 1)[0]
    problem = campaign_name_problem(campaign)
    if problem is None:
        return campaign
    better = _suggestion(campaign)
    hint = f"rename it to '{better}__...'" if better else "rename it"
    raise CampaignNameError(
        f"{source or _quoted(name)}: invalid campaign {_quoted(campaign)} (the part of the "
        f"name before '{CAMPAIGN_SEPARATOR}'): a campaign must match {CAMPAIGN_RULE} "
        f"(lower-case letters, digits and '-', 1-64 characters); {problem}. Fix: {hint}, or "
        f"drop the '{CAMPAIGN_SEPARATOR}' to file it under campaign '{DEFAULT_CAMPAIGN}'"
    )


def campaign_or_problem(name: str, *, source: str | None = None) -> tuple[str | None, str | None]:
    """(campaign, None) for a valid name; (None, the reason) for an invalid campaign part."""
    try:
        return campaign_of(name, source=source), None
    except CampaignNameError as exc:
        return None, str(exc)


def validate(study: Study, frame: pd.DataFrame, *, source: str) -> pd.DataFrame:
    """Validate with the study's schema; raises `DataError` naming file, rows and fields."""
    if study is Study.press:
        return validate_press_table(frame, source=source)
    from schemas.drive import validate_drive_recording

    table = validate_drive_recording(frame, source=source)
    # One schema for every drive part: known columns only, `position_rad` null when absent.
    columns = list(DRIVE_COLUMNS + DRIVE_OPTIONAL)
    return table.reindex(columns=columns).astype(float).reset_index(drop=True)

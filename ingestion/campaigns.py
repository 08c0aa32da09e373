"""The campaign file `<data root>/campaigns.toml`: which study `--trigger-studies` starts for a
campaign that received new data, and with which settings.

```toml
[line-1]                           # a campaign: the part before `__` of its file names
study = "press"                    # press or drive
models = ["spring", "M1"]          # built-in names, or plugins the worker allows
sensor_sheet = "sheets/line-1.csv" # relative to this file's folder, inside the data root
n_sensors = 2
tests = 100
```

The file is untrusted input, like a dashboard request: whoever can write into the data root
wrote it. This module checks its shape: at most `MAX_BYTES` in lines of at most `MAX_LINE`
characters, UTF-8 TOML, one table per campaign named by the campaign rule, a `study` kind,
plain values (no TOML dates), and file paths that stay inside the data root
(`confined_path`). What a setting means, and whether its value is valid, is decided by the
study's own settings model (`flows/campaign_studies.py` maps the keys onto `PressStudy` /
`DriveSearch`; plugin models must be allowed on the worker). A problem of the file as a whole
(unreadable, too big, bad TOML, a table head that is not a campaign) raises
`CampaignFileError` naming the file; a problem inside one campaign's table is kept for that
campaign only, so the other campaigns still start.

Ingestion itself never reads this file: a bad campaign file refuses studies, never the filing
of data. Messages quote at most `_QUOTE` characters of any value from the file.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestion.errors import IngestError
from ingestion.layout import CAMPAIGN_FILE
from ingestion.names import CAMPAIGN_RULE
from ingestion.rules import Study, campaign_name_problem

MAX_BYTES = 64 * 1024
MAX_LINE = 1000
STUDY_KEY = "study"
_QUOTE = 120


class CampaignFileError(IngestError):
    """The campaign file, or one campaign's table in it, is unusable; the message names the
    file, the campaign and the key."""


def quoted(value: object, limit: int = _QUOTE) -> str:
    """`repr(value)`, cut to `limit` characters (values come from an untrusted file)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def where(path: Path, campaign: str, key: str | None = None) -> str:
    """`<file>: campaign 'x', key 'y'`: the start of every message about a setting."""
    text = f"{path}: campaign {quoted(campaign)}"
    return text if key is None else f"{text}, key {quoted(key)}"


@dataclass(frozen=True)
class CampaignEntry:
    """One campaign's table: its study kind and its other keys as written (not yet checked
    against the study's settings model)."""

    path: Path
    campaign: str
    study: Study
    settings: Mapping[str, Any]

    def where(self, key: str | None = None) -> str:
        return where(self.path, self.campaign, key)


@dataclass(frozen=True)
class CampaignFile:
    """The campaign file of a data root: usable entries, and the problem of each campaign
    whose table is not usable."""

    path: Path
    entries: Mapping[str, CampaignEntry] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)

    def entry(self, campaign: str) -> CampaignEntry | None:
        """The campaign's entry; None if the file has none; `CampaignFileError` if its table
        is not usable."""
        if campaign in self.problems:
            raise CampaignFileError(self.problems[campaign])
        return self.entries.get(campaign)


def campaign_file_path(data_root: str | Path) -> Path:
    return Path(data_root) / CAMPAIGN_FILE


def read_campaign_file(data_root: str | Path) -> CampaignFile | None:
    """The data root's campaign file, checked (module docstring); None if there is none."""
    path = campaign_file_path(data_root)
    raw = _read_bytes(path)
    if raw is None:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CampaignFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_LINE:  # long dotted keys cost the TOML parser quadratic time
            raise CampaignFileError(
                f"{path}: line {number} has {len(line)} characters, at most {MAX_LINE}"
            )
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignFileError(f"{path}: not valid TOML: {str(exc)[:200]}") from None
    except RecursionError:
        raise CampaignFileError(f"{path}: not valid TOML: values nested too deeply") from None
    entries: dict[str, CampaignEntry] = {}
    problems: dict[str, str] = {}
    for campaign, table in document.items():
        if not isinstance(table, dict):
            raise CampaignFileError(
                f"{path}: top-level key {quoted(campaign)} is not a campaign table: write the "
                f"settings under a table head [campaign-name]"
            )
        problem = campaign_name_problem(campaign)
        if problem is not None:
            raise CampaignFileError(
                f"{where(path, campaign)}: not a campaign name ({problem}); a campaign must "
                f"match {CAMPAIGN_RULE}, as in the file names '<campaign>__<anything>.csv'"
            )
        try:
            entries[campaign] = _entry(path, campaign, table)
        except CampaignFileError as exc:
            problems[campaign] = str(exc)
    return CampaignFile(path, entries, problems)


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes: a regular file (symlinks not followed), at most `MAX_BYTES`."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CampaignFileError(
                f"{path}: a symbolic link, not followed; put the file itself in the data root"
            ) from None
        raise CampaignFileError(f"{path}: cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CampaignFileError(f"{path}: not a regular file")
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise CampaignFileError(
            f"{path}: larger than {MAX_BYTES} bytes ({st.st_size} bytes); a campaign file "
            "holds a few settings per campaign"
        )
    return raw


def _entry(path: Path, campaign: str, table: dict[str, Any]) -> CampaignEntry:
    kinds = [s.value for s in Study]
    if STUDY_KEY not in table:
        raise CampaignFileError(
            f"{where(path, campaign)}: missing key '{STUDY_KEY}' (one of {kinds})"
        )
    kind = table[STUDY_KEY]
    if not isinstance(kind, str) or kind not in kinds:
        raise CampaignFileError(
            f"{where(path, campaign, STUDY_KEY)}: unknown study kind {quoted(kind)}; use one of "
            f"{kinds}"
        )
    settings = {k: v for k, v in table.items() if k != STUDY_KEY}
    for key, value in settings.items():
        problem = _not_plain(value)
        if problem:
            raise CampaignFileError(f"{where(path, campaign, key)}: {problem}")
    return CampaignEntry(path, campaign, Study(kind), settings)


def _not_plain(value: object, depth: int = 0) -> str | None:
    """Why `value` is not a plain setting (string, number, boolean, array, table), or None."""
    if isinstance(value, dt.date | dt.time):  # datetime is a date
        return f"a TOML date or time ({quoted(value)}) is not a setting; quote it as a string"
    if depth > 4:
        return "values nested more than 4 levels deep are not settings"
    if isinstance(value, list):
        return next((p for p in (_not_plain(v, depth + 1) for v in value) if p), None)
    if isinstance(value, dict):
        return next((p for p in (_not_plain(v, depth + 1) for v in value.values()) if p), None)
    return None


def confined_path(entry: CampaignEntry, key: str, value: object, data_root: Path) -> str:
    """A path setting of the file as an absolute path: relative to the file's folder, and,
    after resolving `..` and symbolic links, an existing file inside the data root."""
    if not isinstance(value, str) or not value or len(value) > 1000 or "\0" in value:
        raise CampaignFileError(
            f"{entry.where(key)}: expected a file path (text, relative to {entry.path.parent}), "
            f"got {quoted(value)}"
        )
    root = data_root.resolve()
    target = (entry.path.parent / value).resolve()
    if target != root and root not in target.parents:
        raise CampaignFileError(
            f"{entry.where(key)}: {quoted(value)} is outside the data root {root}; a campaign "
            "file may only name files inside its data root"
        )
    if not target.is_file():
        raise CampaignFileError(f"{entry.where(key)}: {quoted(value)}: no such file in {root}")
    return str(target)

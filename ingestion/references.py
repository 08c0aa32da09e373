"""Ingested data by reference: `campaign:<name>` or `campaign:<name>@<sha256 prefix>`.

A flow started from the dashboard names its data by what was ingested, not by a file path:

- press, `campaign:line-1`: the campaign's table from all its files in the dataset (the table
  `--trigger-studies` builds, `readers.campaign_table`); `campaign:line-1@3fa2c81d`: the rows of
  that one ingested file;
- drive, `campaign:rig-2@3fa2c81d`: that ingested recording; `campaign:rig-2`: the campaign's
  newest recording (ledger order).

The hash is the ingested file's content hash (`ledger.jsonl`, `greylab ingest --json`), at
least 8 hex digits. Unknown campaigns or hashes raise `IngestError` naming what exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from ingestion.errors import IngestError
from ingestion.layout import LEDGER
from ingestion.ledger import Ledger, current_ingested
from ingestion.names import CAMPAIGN_RULE
from ingestion.readers import campaign_table, drive_recording
from ingestion.rules import SOURCE_COLUMN, Study, validate

PREFIX = "campaign:"
_REFERENCE = re.compile(rf"^{PREFIX}({CAMPAIGN_RULE})(?:@([0-9a-f]{{8,64}}))?$")
_SHOWN = 10


def is_reference(value: str) -> bool:
    return value.startswith(PREFIX)


def parse_reference(value: str) -> tuple[str, str | None]:
    """(campaign, hash prefix or None) of `campaign:<name>[@<hash>]`; `IngestError` if the text
    starts with `campaign:` but is not such a reference."""
    match = _REFERENCE.match(value.strip())
    if match is None:
        shown = repr(value) if len(value) <= 120 else repr(value[:116]) + "..."
        raise IngestError(
            f"{shown} is not a data reference: write campaign:<name> or "
            f"campaign:<name>@<content hash, 8-64 hex digits>, the campaign as in the file names "
            f"({CAMPAIGN_RULE})"
        )
    return match.group(1), match.group(2)


def ingested_files(data_root: Path, study: Study | str) -> list[dict[str, Any]]:
    """The ledger records of the files of `study` in the dataset now, in ledger order."""
    records = current_ingested(Ledger(Path(data_root) / LEDGER).read()).values()
    return [r for r in records if r.get("study") == Study(study).value]


def campaign_choices(data_root: Path, study: Study | str) -> list[str]:
    """`campaign:<name>` of every campaign of `study` with data (for the Prefect form)."""
    try:
        files = ingested_files(data_root, study)
    except (OSError, IngestError):
        return []
    return [f"{PREFIX}{c}" for c in sorted({str(r.get("campaign")) for r in files})]


def _pick(files: list[dict[str, Any]], campaign: str, sha: str | None, where: str) -> dict:
    mine = [r for r in files if r.get("campaign") == campaign]
    if not mine:
        known = sorted({str(r.get("campaign")) for r in files})
        shown = ", ".join(known[:_SHOWN]) + (", ..." if len(known) > _SHOWN else "")
        raise IngestError(f"{where}: no ingested data of campaign '{campaign}' (campaigns: "
                          f"{shown or 'none'})")  # fmt: skip
    if sha is None:
        return mine[-1]
    found = [r for r in mine if str(r.get("sha256", "")).startswith(sha)]
    if len(found) != 1:
        hashes = ", ".join(str(r.get("sha256"))[:12] for r in mine[-_SHOWN:])
        what = "no" if not found else "more than one"
        raise IngestError(f"{where}: {what} ingested file of campaign '{campaign}' with hash "
                          f"{sha} (its files: {hashes})")  # fmt: skip
    return found[0]


def reference_table(data_root: Path, study: Study | str, reference: str) -> pd.DataFrame:
    """The table `reference` names (module docstring), validated."""
    study = Study(study)
    campaign, sha = parse_reference(reference)
    where = f"{reference} (data root {data_root})"
    files = ingested_files(data_root, study)
    if study is Study.press and sha is None:
        _pick(files, campaign, None, where)  # the campaign must exist
        return campaign_table(data_root, study, campaign)
    record = _pick(files, campaign, sha, where)
    if study is Study.drive:
        return drive_recording(data_root, str(record["part"]))
    frame = pd.read_parquet(Path(data_root) / str(record["part"])).drop(columns=[SOURCE_COLUMN])
    return validate(study, frame, source=where)

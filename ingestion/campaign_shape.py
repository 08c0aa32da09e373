"""One campaign, one shape: a press file whose sensors or steps differ from its campaign's
data is quarantined with the difference named, never appended.

A press campaign is concatenated into one table for its study (`readers.campaign_table`), and a
press table needs every step and every sensor in every series: one file with another sensor
set would break every later study of the campaign. So every press file of a campaign has the
same sensor set and the same step set (its columns are the press columns, extra ones are
dropped). The campaign's shape is that of its first file still in the dataset (ledger order); a
file withdrawn (`greylab ingest withdraw`) no longer counts. A new sensor set is a new
campaign: name its files `<new campaign>__...`. Drive recordings are separate experiments
(one search each, never concatenated) and share one part schema (`position_rad` null when a
file has none), so a campaign may mix recordings with and without positions.

Also here: recognising an upload that grew after it was taken (`grown_from`): same name as a
file in the dataset, and its first bytes are exactly that file (same SHA-256 of the prefix).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ingestion.layout import archive_path
from ingestion.rules import Study

Shape = dict[str, list[Any]]
_SHOWN = 8


def shape_of(study: Study | str, table: pd.DataFrame) -> Shape:
    """Press: sorted sensors and steps; drive: nothing to agree on (module docstring)."""
    if Study(study) is not Study.press:
        return {}
    return {
        "sensors": sorted(str(s) for s in table["sensor"].unique()),
        "steps": sorted(int(s) for s in table["step"].unique()),
    }


def part_shape(root: Path, record: Mapping[str, Any]) -> Shape | None:
    """The shape of an ingested file from its part; None if the part cannot be read."""
    part = record.get("part")
    if not isinstance(part, str):
        return None
    if record.get("study") != Study.press.value:
        return {}
    try:
        table = pq.read_table(root / part, columns=["sensor", "step"]).to_pandas()
    except Exception:  # a part that cannot be read gives no shape to compare with
        return None
    return shape_of(Study.press, table)


def _listed(values: list[Any]) -> str:
    shown = [repr(v) if isinstance(v, str) else str(v) for v in values[:_SHOWN]]
    more = f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else ""
    return "[" + ", ".join(shown) + "]" + more


def shape_problem(
    source: str, study: str, campaign: str, shape: Shape, reference: Shape, first: str
) -> str | None:
    """Why a file of shape `shape` does not fit its campaign (shape `reference` of the file
    `first`), naming the difference; None if it fits."""
    problems = []
    for key in ("sensors", "steps"):
        new, old = shape.get(key), reference.get(key)
        if new is None or old is None or new == old:
            continue
        text = f"its {key} {_listed(new)} differ from the campaign's {_listed(old)}"
        missing = [v for v in old if v not in set(new)]
        extra = [v for v in new if v not in set(old)]
        details = [f"missing {_listed(missing)}"] if missing else []
        details += [f"not in the campaign {_listed(extra)}"] if extra else []
        problems.append(text + (f" ({'; '.join(details)})" if details else ""))
    if not problems:
        return None
    return (
        f"{source}: does not fit campaign '{campaign}' ({study}): {'; '.join(problems)}. Every "
        "press table of a campaign must have the same sensors and steps (a campaign's files "
        f"are studied as one table); the campaign's shape is that of {first}. Fix: name the file for a new "
        "campaign ('<new-campaign>__...'), or take the campaign's files out first with "
        "`greylab ingest withdraw HASH` and drop them again"
    )


def prefix_sha256(path: Path, size: int) -> str | None:
    """SHA-256 of the first `size` bytes of `path` (None if it is shorter or unreadable)."""
    digest = hashlib.sha256()
    left = size
    try:
        with open(path, "rb") as handle:
            while left > 0:
                chunk = handle.read(min(left, 1 << 20))
                if not chunk:
                    return None
                digest.update(chunk)
                left -= len(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def ingested_size(root: Path, record: Mapping[str, Any]) -> int | None:
    """Bytes of an ingested file: from the ledger's identity of the inbox file, else from its
    archived original."""
    source = record.get("source")
    if isinstance(source, list) and len(source) == 4 and isinstance(source[2], int):
        return source[2]
    try:
        return os.stat(archive_path(root, str(record["sha256"]), str(record["name"]))).st_size
    except (OSError, KeyError):
        return None


def grown_from(
    root: Path, current: Mapping[str, Mapping[str, Any]], name: str, staged: Path, size: int
) -> Mapping[str, Any] | None:
    """The ingested record that the file `name` (staged at `staged`, `size` bytes) extends:
    same name, fewer bytes, and exactly those bytes at its start; None otherwise."""
    for sha, record in current.items():
        if record.get("name") != name:
            continue
        old = ingested_size(root, record)
        if old is None or old >= size:
            continue
        if prefix_sha256(staged, old) == sha:
            return record
    return None

"""Results of an ingestion run: one `FileOutcome` per inbox entry and the `IngestReport`.

Frozen dataclasses with `to_dict()` returning plain JSON types. `neutralise_formulas` makes
the report table safe to open as CSV in a spreadsheet (text cells starting with `= + - @`, tab
or CR get a leading `'`, so they are shown as text instead of evaluated).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


class Status(StrEnum):
    ingested = "ingested"  # new rows appended (or a crashed run's part recorded)
    resumed = "resumed"  # ledger already had it; the original was archived now
    duplicate = "duplicate"  # content already ingested (under this or another name)
    quarantined = "quarantined"  # invalid: moved to quarantine with an error report
    skipped = "skipped"  # left in the inbox (symlink, folder, hidden, still uploading)


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one inbox entry.

    Fields: `name` (original, for display), `status`, `sha256`, `study`, `campaign`, `rows`
    (rows appended, 0 unless ingested), `target` (where the file or part went, relative to the
    data root), `message` (reason or the validation error).
    """

    name: str
    status: Status
    sha256: str | None = None
    study: str | None = None
    campaign: str | None = None
    rows: int = 0
    target: str | None = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}


@dataclass(frozen=True)
class IngestReport:
    """One ingestion run: per-file outcomes and totals.

    Fields: `inbox`, `data_root`, `dry_run`, `started`, `finished` (ISO UTC), `outcomes`.
    """

    inbox: str
    data_root: str
    dry_run: bool
    started: str
    finished: str
    outcomes: tuple[FileOutcome, ...] = field(default_factory=tuple)

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status is status)

    @property
    def counts(self) -> dict[str, int]:
        return {s.value: self.count(s) for s in Status}

    @property
    def rows(self) -> int:
        return sum(o.rows for o in self.outcomes)

    @property
    def new_data(self) -> list[tuple[str, str]]:
        """(study, campaign) pairs that received new rows in this run, sorted."""
        return sorted(
            {
                (o.study, o.campaign)
                for o in self.outcomes
                if o.status is Status.ingested and o.study and o.campaign
            }
        )

    def table(self) -> pd.DataFrame:
        columns = [f.name for f in FileOutcome.__dataclass_fields__.values()]
        return pd.DataFrame([o.to_dict() for o in self.outcomes], columns=columns)

    def summary(self) -> str:
        head = "dry run: " if self.dry_run else ""
        counts = ", ".join(f"{n} {s}" for s, n in self.counts.items() if n)
        lines = [f"{head}ingestion of {self.inbox}: {counts or 'nothing to do'}; {self.rows} rows"]
        for o in self.outcomes:
            if o.status in (Status.quarantined, Status.duplicate, Status.skipped):
                first = o.message.splitlines()[0] if o.message else ""
                lines.append(f"  {o.status.value:<11} {o.name}: {first}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "inbox": self.inbox,
            "data_root": self.data_root,
            "dry_run": self.dry_run,
            "started": self.started,
            "finished": self.finished,
            "counts": self.counts,
            "rows": self.rows,
            "new_data": [{"study": s, "campaign": c} for s, c in self.new_data],
            "outcomes": [o.to_dict() for o in self.outcomes],
        }


def neutralise_formulas(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells that a spreadsheet would run as a formula, prefixed with `'`."""

    def cell(value: object) -> object:
        if isinstance(value, str) and value.startswith(_FORMULA):
            return "'" + value
        return value

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype) in ("str", "string"):
            out[column] = out[column].map(cell).astype(object)
    return out

"""Lab-data ingestion: inbox -> validated, partitioned Parquet dataset; archive; quarantine.

Which study a file belongs to (by its columns, exact names):

- press measurement table: `series, step, force_setpoint_N, force_N, sensor, displacement_um`
- drive recording: `t_s, torque_Nm, velocity_rad_s` (+ optional `position_rad`)

A file with every column of exactly one study belongs to it; with every column of both it is
ambiguous (quarantined). Otherwise it belongs to the study whose columns it has the larger
share of, if that share is at least half (so a press table lacking one column is reported as
"press table missing column ..."); anything else is "neither" (quarantined). Extra columns
are dropped; drive parts always carry `position_rad` (null when the file has none), so
all parts of a study share one Parquet schema.

Campaign, from the file name: `<campaign>__<anything>.csv|.parquet` with campaign
`[a-z0-9-]{1,64}` (lower case; two underscores separate it); any other name goes to campaign
`default`. Example: `line-3__2026-05-01_run2.csv` -> campaign `line-3`.

Layout under the data root:

```
datasets/study=<press|drive>/campaign=<name>/part-<sha256>.parquet   validated rows
archive/<sha256>-<safe name>                                          ingested originals
quarantine/<safe name> + <safe name>.error.txt                        rejects + reason
ledger.jsonl                                                          one record per outcome
.staging/                                                             copies being ingested
.ingest.lock                                                          one run at a time (the
                                                                      inbox folder is locked too)
```

Identity is the SHA-256 of the file's bytes: a file whose content is already in the ledger is
a duplicate (archived, reported, not appended) whatever its name. Each part holds the validated
rows plus `source_sha256`; the part is named by the content hash, so rewriting it is
idempotent.

Which files, and when: only `.csv`/`.parquet` files directly in the inbox (anything else is
left in place and reported). A file is taken when stable: not modified for the settle window,
then the same size, mtime and SHA-256 after waiting it again. It is copied to
`<data root>/.staging/<sha256>-<safe name>`, hashed while copied; the staged copy is what is
read, stored, archived or quarantined (too big to stage: the original is quarantined). The inbox
file is removed at the end if it is still the file that was taken; if it changed meanwhile it is
set aside in quarantine (its old content is ingested already). Folders on the import path are
refused (`tasks.ingest_stage.check_locations`).

Crash safety: part (atomic temp + fsync + rename) -> ledger record (fsynced append, with the
inbox file's identity) -> archive the staged copy -> remove the inbox file. A staged copy left
by a run killed after its ledger record is archived by the next run. A re-run completes a half-done job: a part without ledger record is reused and
recorded; a ledger record whose original is still in the inbox is finished by archiving it.
Temporary files of killed writes start with a dot, so dataset readers (pyarrow) skip them;
the next run removes them.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow.parquet as pq
from prefect import task

from schemas.errors import DataError
from schemas.lab_files import FileLimits, check_size, read_limited, table_columns
from schemas.press import validate_press_table
from schemas.storage import write_parquet_atomic
from tasks.ingest_files import (
    FileIdentity,
    IngestError,
    Ledger,
    display_name,
    exclusive_lock,
    fsync_dir,
    hash_file,
    move_no_overwrite,
    safe_name,
    same_file,
    scan_inbox,
    unchanged,
    write_text_atomic,
)
from tasks.ingest_stage import (
    DATA_SUFFIXES,
    STAGING,
    check_locations,
    neutralise_formulas,
    stage_copy,
)

if TYPE_CHECKING:
    from tasks.tracking import Tracker

PRESS_COLUMNS = ("series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um")
DRIVE_COLUMNS = ("t_s", "torque_Nm", "velocity_rad_s")
DRIVE_OPTIONAL = ("position_rad",)
DEFAULT_CAMPAIGN = "default"
SOURCE_COLUMN = "source_sha256"
_CAMPAIGN = re.compile(r"([a-z0-9-]{1,64})__.+", re.DOTALL)


class Study(StrEnum):
    press = "press"
    drive = "drive"


class Status(StrEnum):
    ingested = "ingested"  # new rows appended (or a crashed run's part recorded)
    resumed = "resumed"  # ledger already had it; the original was archived now
    duplicate = "duplicate"  # content already ingested (under this or another name)
    quarantined = "quarantined"  # invalid: moved to quarantine with an error report
    skipped = "skipped"  # left in the inbox (symlink, folder, hidden, still uploading)


# -- rules ----------------------------------------------------------------------------------


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


def part_path(data_root: Path, study: Study | str, campaign: str, sha256: str) -> Path:
    return (
        data_root
        / "datasets"
        / f"study={study}"
        / f"campaign={campaign}"
        / f"part-{sha256}.parquet"
    )


# -- results --------------------------------------------------------------------------------


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


# -- the job --------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def check_folders(inbox: Path, data_root: Path) -> None:
    """The inbox must be an existing folder outside the dataset, archive and quarantine."""
    if not inbox.is_dir():
        raise IngestError(f"inbox {inbox}: not an existing folder")
    inbox_r, root_r = inbox.resolve(), data_root.resolve()
    for managed in ("datasets", "archive", "quarantine"):
        folder = root_r / managed
        if inbox_r == folder or folder in inbox_r.parents or inbox_r in folder.parents:
            raise IngestError(
                f"inbox {inbox} overlaps the managed folder {folder}; use a separate inbox"
            )
    if inbox_r == root_r:
        raise IngestError(f"inbox {inbox} is the data root itself; use a subfolder like inbox/")


class _Job:
    """One run over the inbox; `dry_run` decides everything but writes and moves nothing."""

    def __init__(self, inbox: Path, data_root: Path, dry_run: bool, limits: FileLimits) -> None:
        self.inbox, self.root, self.dry_run, self.limits = inbox, data_root, dry_run, limits
        self.ledger = Ledger(data_root / "ledger.jsonl")
        records = self.ledger.read()
        self.ingested = {r["sha256"]: r for r in records if r.get("status") == "ingested"}
        self.duplicates = {
            (r["sha256"], r["name"]) for r in records if r.get("status") == "duplicate"
        }

    # -- entry point for one file --
    def process(self, name: str, path: Path, sha: str, identity: FileIdentity) -> FileOutcome:
        """One file observed as (`sha`, `identity`) at least a settle window ago."""
        shown = display_name(name)
        if not unchanged(path, identity):
            why = "vanished" if not os.path.lexists(path) else "changed"
            return FileOutcome(shown, Status.skipped, message=f"{why} during the settle window")
        if identity.size > self.limits.max_bytes:  # too big to copy or read: set it aside
            try:
                check_size(path, self.limits, shown)
            except DataError as exc:
                return self._quarantine(name, path, sha, str(exc), original=path, identity=identity)
        if self.dry_run:
            staged = path
        else:
            try:
                staged, copied, _ = stage_copy(path, self.root / STAGING, safe_name(name))
            except FileNotFoundError:
                return FileOutcome(shown, Status.skipped, message="vanished during the run")
            except IngestError as exc:
                return FileOutcome(shown, Status.skipped, message=str(exc))
            if copied != sha or not unchanged(path, identity):
                staged.unlink(missing_ok=True)
                return FileOutcome(shown, Status.skipped, message="changed while being copied")
        known = self.ingested.get(sha)
        if known is not None:
            return self._already_ingested(name, path, staged, sha, known, identity)
        try:
            columns = table_columns(staged, self.limits, source=shown)
            study = classify(columns, source=shown)
            wanted: tuple[str, ...] = (
                PRESS_COLUMNS if study is Study.press else DRIVE_COLUMNS + DRIVE_OPTIONAL
            )
            if not set(PRESS_COLUMNS if study is Study.press else DRIVE_COLUMNS) <= set(columns):
                wanted = tuple(columns)  # rejected anyway: let the message list every column
            frame = read_limited(staged, self.limits, columns=wanted, source=shown)
            campaign = campaign_of(name)
            table = validate(study, frame, source=shown)
        except Exception as exc:  # untrusted bytes: whatever breaks the reader is a reject
            message = (
                str(exc)
                if isinstance(exc, DataError)
                else f"{shown}: unexpected error while reading or validating "
                f"({type(exc).__name__}: {str(exc)[:300]}); please report it with this file"
            )
            return self._quarantine(name, staged, sha, message, original=path, identity=identity)
        return self._ingest(name, staged, sha, study, campaign, table, path, identity)

    def _drop_original(self, name: str, path: Path, identity: FileIdentity) -> str:
        """Remove the inbox file once its staged copy is stored; a note for the report."""
        if self.dry_run:
            return ""
        if not os.path.lexists(path):
            return "; the inbox file had already been removed by someone else"
        if unchanged(path, identity):
            path.unlink(missing_ok=True)
            fsync_dir(path.parent)
            return ""
        # Rewritten after it was taken: keep the new bytes, but out of the inbox, so the next
        # run does not ingest the old rows a second time.
        target = self._free_name(self.root / "quarantine", safe_name(name), "changed")
        with contextlib.suppress(FileNotFoundError):
            write_text_atomic(
                f"file: {display_name(name)}\nquarantined: {_now()}\n\nproblem:\nthe file "
                "changed after it was taken for ingestion; its earlier content is ingested and "
                "archived. Check which rows are new and drop only those into the inbox.\n",
                target.with_name(target.name + ".error.txt"),
            )
            move_no_overwrite(path, target)
            return f"; the inbox file changed meanwhile and was set aside as {target.name}"
        return "; the inbox file had already been removed by someone else"

    def _ingest(
        self,
        name: str,
        staged: Path,
        sha: str,
        study: Study,
        campaign: str,
        table: pd.DataFrame,
        original: Path,
        identity: FileIdentity,
    ) -> FileOutcome:
        part = part_path(self.root, study, campaign, sha)
        record: dict[str, Any] = {
            "sha256": sha,
            "name": name,
            "study": study.value,
            "campaign": campaign,
            "rows": len(table),
            "status": Status.ingested.value,
            "part": str(part.relative_to(self.root)),
        }
        note = ""
        if not self.dry_run:
            if not unchanged(original, identity) and os.path.lexists(original):
                staged.unlink(missing_ok=True)
                return FileOutcome(
                    display_name(name), Status.skipped, sha, message="changed while being read"
                )
            if not _part_is_complete(part, len(table)):
                write_parquet_atomic(table.assign(**{SOURCE_COLUMN: sha}), part)
                fsync_dir(part.parent)
            self.ledger.append({**record, "source": _identity_list(identity), "time": _now()})
            self._archive(staged, sha, name)
            note = self._drop_original(name, original, identity)
        self.ingested[sha] = record
        return FileOutcome(
            display_name(name),
            Status.ingested,
            sha256=sha,
            study=study.value,
            campaign=campaign,
            rows=len(table),
            target=record["part"],
            message=f"{len(table)} rows -> {record['part']}{note}",
        )

    def _already_ingested(
        self,
        name: str,
        path: Path,
        staged: Path,
        sha: str,
        known: dict[str, Any],
        identity: FileIdentity,
    ) -> FileOutcome:
        shown = display_name(name)
        study, campaign = known.get("study"), known.get("campaign")
        archived = self._archive_path(sha, name)
        # A crash between the ledger record and removing the inbox file leaves the very same
        # file behind: same name, and not archived yet or the very file the ledger recorded.
        same = known.get("source") == _identity_list(identity) or same_file(path, archived)
        if known.get("name") == name and (not archived.exists() or same):
            target = archived
            if not self.dry_run:
                target = self._archive(staged, sha, name)
                self._drop_original(name, path, identity)
            return FileOutcome(
                shown,
                Status.resumed,
                sha256=sha,
                study=study,
                campaign=campaign,
                target=str(target.relative_to(self.root)),
                message="recorded by an interrupted run; archived now",
            )
        if not self.dry_run:
            if (sha, name) not in self.duplicates:
                self.ledger.append(
                    {
                        "sha256": sha,
                        "study": study,
                        "campaign": campaign,
                        "name": name,
                        "rows": 0,
                        "status": Status.duplicate.value,
                        "duplicate_of": known.get("name"),
                        "time": _now(),
                    }
                )
            target = self._archive(staged, sha, name)
            self._drop_original(name, path, identity)
        else:
            target = archived
        self.duplicates.add((sha, name))
        return FileOutcome(
            shown,
            Status.duplicate,
            sha256=sha,
            study=study,
            campaign=campaign,
            target=str(target.relative_to(self.root)),
            message=f"same content as {display_name(str(known.get('name')))} "
            f"(already ingested into {study}/{campaign})",
        )

    def _quarantine(
        self,
        name: str,
        path: Path,
        sha: str,
        error: str,
        *,
        original: Path,
        identity: FileIdentity,
    ) -> FileOutcome:
        """Move `path` (the staged copy, or the original if too big to stage) to quarantine."""
        folder = self.root / "quarantine"
        target = self._free_name(folder, safe_name(name), sha)
        if not self.dry_run:
            report = (
                f"file: {display_name(name)}\nsha256: {sha}\nquarantined: {_now()}\n"
                f"quarantined as: {target.name}\n\nproblem:\n{error}\n\n"
                "Fix the file and drop it into the inbox again (under any name).\n"
            )
            while True:
                write_text_atomic(report, target.with_name(target.name + ".error.txt"))
                try:
                    move_no_overwrite(path, target)
                    break
                except FileExistsError:  # taken in between by someone else: next free name
                    target = self._free_name(folder, safe_name(name), sha)
                except FileNotFoundError:  # the original vanished: nothing to set aside
                    target.with_name(target.name + ".error.txt").unlink(missing_ok=True)
                    return FileOutcome(
                        display_name(name), Status.skipped, sha, message="vanished during the run"
                    )
            if path != original:
                self._drop_original(name, original, identity)
            self.ledger.append(
                {
                    "sha256": sha,
                    "name": name,
                    "study": None,
                    "campaign": None,
                    "rows": 0,
                    "status": Status.quarantined.value,
                    "quarantine": str(target.relative_to(self.root)),
                    "error": error.splitlines()[0] if error else "",
                    "time": _now(),
                }
            )
        return FileOutcome(
            display_name(name),
            Status.quarantined,
            sha,
            target=str(target.relative_to(self.root)),
            message=error,
        )

    # -- places --
    def _archive_path(self, sha: str, name: str) -> Path:
        return self.root / "archive" / f"{sha}-{safe_name(name)}"

    def _archive(self, path: Path, sha: str, name: str) -> Path:
        """Move to the archive; never overwrite. An identical archived copy makes the inbox
        copy redundant (same bytes by hash), so it is removed instead."""
        target = self._archive_path(sha, name)
        for attempt in range(1000):
            try:
                return move_no_overwrite(path, target)
            except FileExistsError:
                if same_file(path, target) or _sha_of(target) == sha:
                    path.unlink()
                    return target
                target = target.with_name(f"{sha}-{attempt + 1}-{safe_name(name)}")
        raise IngestError(f"{display_name(name)}: no free archive name for {sha}")

    @staticmethod
    def _free_name(folder: Path, name: str, sha: str) -> Path:
        stem, dot, suffix = name.rpartition(".")
        stem, suffix = (stem, dot + suffix) if dot and stem else (name, "")
        candidates = [name, f"{stem}-{sha[:12]}{suffix}"]
        candidates += [f"{stem}-{sha[:12]}-{n}{suffix}" for n in range(1, 1000)]
        for candidate in candidates:
            path = folder / candidate
            if not path.exists() and not path.with_name(candidate + ".error.txt").exists():
                return path
        raise IngestError(f"{folder}: no free quarantine name for {name}")


def _identity_list(identity: FileIdentity) -> list[int]:
    return [identity.dev, identity.ino, identity.size, identity.mtime_ns]


def _sha_of(path: Path) -> str | None:
    try:
        return hash_file(path)[0]
    except (OSError, IngestError):
        return None


def _part_is_complete(path: Path, rows: int) -> bool:
    """A part left by an interrupted run is reused if it is a readable Parquet file with the
    expected row count (it is named by content, so it holds the same rows)."""
    if not path.exists():
        return False
    try:
        return pq.read_metadata(path).num_rows == rows
    except Exception:  # truncated or foreign file: rewrite it atomically
        return False


def _remove_stale_temp_files(data_root: Path, ingested: set[str]) -> int:
    """Temporary files of writers killed mid-write (`.<name>.<random>.tmp`); lock held.

    A staged copy left by a run killed after its ledger record and before archiving is
    archived now (the ledger must never say "ingested" without an archived original)."""
    removed = 0
    for folder in ("datasets", "archive", "quarantine", STAGING):
        base = data_root / folder
        if base.is_dir():
            for tmp in base.rglob(".*.tmp"):
                if tmp.is_file() and not tmp.is_symlink():
                    tmp.unlink(missing_ok=True)
                    removed += 1
    staging = data_root / STAGING
    if staging.is_dir():
        for left in staging.iterdir():
            if left.is_file() and not left.is_symlink():
                if left.name[:64] in ingested:
                    try:
                        move_no_overwrite(left, data_root / "archive" / left.name)
                        continue
                    except FileExistsError:
                        pass
                left.unlink(missing_ok=True)
                removed += 1
    return removed


def ingest_inbox(
    inbox: str | Path,
    data_root: str | Path,
    *,
    dry_run: bool = False,
    settle_seconds: float = 0.0,
    campaign: str | None = None,
    limits: FileLimits | None = None,
    on_file: Callable[[FileOutcome], None] | None = None,
    wait: Callable[[float], None] = time.sleep,
) -> IngestReport:
    """Ingest every new file in `inbox` into the dataset under `data_root` (see module doc).

    Only `.csv`/`.parquet` files directly in the inbox are touched (anything else is left
    in place and reported as skipped). A file is taken only when stable: not modified for
    `settle_seconds`, then the same size, mtime and SHA-256 again after waiting
    `settle_seconds` (`wait` waits; tests act during it). It is copied to `.staging/` and
    hashed there; that copy is read, stored and archived. With `campaign`, only files of that
    campaign are taken. Files are processed in name order under exclusive locks on the data
    root and on the inbox (a second concurrent run raises `IngestBusyError`). `dry_run`
    reports what would happen without writing or moving anything.
    """
    inbox, data_root = Path(inbox), Path(data_root)
    check_folders(inbox, data_root)
    check_locations(inbox, data_root)
    limits = limits or FileLimits.from_env()
    started = _now()
    outcomes: list[FileOutcome] = []

    def report(outcome: FileOutcome) -> None:
        outcomes.append(outcome)
        if on_file is not None:
            on_file(outcome)

    def run() -> None:
        job = _Job(inbox, data_root, dry_run, limits)
        if not dry_run:
            _remove_stale_temp_files(data_root, set(job.ingested))
        observed: list[tuple[str, Path, str, FileIdentity]] = []
        for entry in scan_inbox(inbox, settle_seconds=settle_seconds):
            shown = display_name(entry.name)
            reason = entry.skip_reason
            if reason is None and not entry.name.lower().endswith(DATA_SUFFIXES):
                reason = "not a .csv or .parquet file: left in place"
            if reason is None and campaign is not None and campaign_of(entry.name) != campaign:
                reason = f"campaign '{campaign_of(entry.name)}', not '{campaign}': left in place"
            if reason is None:
                try:
                    if entry.path.lstat().st_size > limits.max_bytes:  # no need to read it
                        identity = FileIdentity.of(entry.path.lstat())
                        observed.append((entry.name, entry.path, "", identity))
                        continue
                    sha, identity = hash_file(entry.path)
                    observed.append((entry.name, entry.path, sha, identity))
                    continue
                except FileNotFoundError:
                    reason = "vanished during the run"
                except IngestError as exc:
                    reason = str(exc)
            report(FileOutcome(shown, Status.skipped, message=reason))
        if settle_seconds > 0 and observed:
            wait(settle_seconds)
        for name, path, sha, identity in observed:
            report(job.process(name, path, sha, identity))

    if dry_run:
        run()
    else:
        data_root.mkdir(parents=True, exist_ok=True)
        with (
            exclusive_lock(data_root / ".ingest.lock"),
            exclusive_lock(inbox),
        ):
            run()
    ordered = tuple(sorted(outcomes, key=lambda o: o.name))
    return IngestReport(str(inbox), str(data_root), dry_run, started, _now(), ordered)


# -- reading the dataset back ---------------------------------------------------------------


def read_dataset(data_root: str | Path, study: Study | str) -> pd.DataFrame:
    """All ingested rows of one study, with a `campaign` column (from the partition path)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    folder = Path(data_root) / "datasets" / f"study={Study(study).value}"
    if not folder.is_dir():
        return pd.DataFrame()
    # Campaigns are names: "007" must stay "007", not become the integer 7.
    partitioning = ds.partitioning(pa.schema([("campaign", pa.string())]), flavor="hive")
    dataset = ds.dataset(folder, format="parquet", partitioning=partitioning)
    return dataset.to_table().to_pandas()


def campaign_table(data_root: str | Path, study: Study | str, campaign: str) -> pd.DataFrame:
    """One press campaign's rows from all its ingested files, in ledger order, validated again.

    The `series` numbers of each file are renumbered after those of earlier files, so
    repeated series from several lab files stay distinct (key series, step, sensor).
    """
    data_root, study = Path(data_root), Study(study)
    if study is not Study.press:
        raise IngestError(
            "drive recordings are separate experiments (each has its own time axis) and are "
            "not concatenated; read them with read_dataset() and group by source_sha256"
        )
    records = [
        r
        for r in Ledger(data_root / "ledger.jsonl").read()
        if r.get("status") == "ingested"
        and r.get("study") == study.value
        and r.get("campaign") == campaign
    ]
    if not records:
        raise IngestError(f"no ingested {study.value} data for campaign '{campaign}'")
    frames, offset = [], 0
    for record in records:
        frame = pd.read_parquet(data_root / record["part"]).drop(columns=[SOURCE_COLUMN])
        codes = pd.factorize(frame["series"], sort=True)[0]
        frame = frame.assign(series=codes + offset)
        offset += int(codes.max()) + 1
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    return validate(study, table, source=f"campaign '{campaign}' ({study.value})")


# -- Prefect tasks (thin) -------------------------------------------------------------------


@task(name="ingest-inbox")
def ingest_inbox_task(
    inbox: str,
    data_root: str,
    dry_run: bool = False,
    settle_seconds: float = 0.0,
    campaign: str | None = None,
) -> IngestReport:
    """The whole inbox in one task: files are processed in order under one lock."""
    return ingest_inbox(
        inbox, data_root, dry_run=dry_run, settle_seconds=settle_seconds, campaign=campaign
    )


def log_ingestion(
    report: IngestReport, experiment: str = "ingest-lab-data", tracker: Tracker | None = None
) -> str:
    """One MLflow run per ingestion: counts as metrics, outcomes and rejects as tables."""
    from tasks.tracking import Tracker

    tracker = tracker or Tracker()
    tracker.ensure_store()
    run_id = tracker.start_run(experiment, f"ingest {report.started}", study="ingest")
    try:
        tracker.log_params(
            run_id,
            {"inbox": report.inbox, "data_root": report.data_root, "dry_run": report.dry_run},
        )
        tracker.log_metrics(
            run_id,
            {
                "files": len(report.outcomes),
                "ingested": report.count(Status.ingested),
                "resumed": report.count(Status.resumed),
                "duplicates": report.count(Status.duplicate),
                "quarantined": report.count(Status.quarantined),
                "skipped": report.count(Status.skipped),
                "rows": report.rows,
            },
        )
        table = neutralise_formulas(report.table())
        tracker.log_table(run_id, table, "ingest/files.csv")
        rejects = table[table["status"].isin([Status.quarantined, Status.duplicate])]
        if not rejects.empty:
            tracker.log_table(run_id, rejects, "ingest/rejects.csv")
        tracker.log_json(run_id, report.to_dict(), "ingest/report.json")
    except BaseException:
        tracker.end_run(run_id, failed=True)
        raise
    tracker.end_run(run_id)
    return run_id


@task(name="log-ingestion")
def log_ingestion_task(report: IngestReport, experiment: str = "ingest-lab-data") -> str:
    return log_ingestion(report, experiment)


@task(name="build-campaign-table")
def campaign_table_task(data_root: str, study: str, campaign: str) -> str:
    """Concatenate a campaign's parts into one content-addressed Parquet table; its path."""
    from schemas.storage import store_table
    from tasks.tracking import content_hash

    table = campaign_table(data_root, study, campaign)
    folder = Path(data_root) / "campaigns" / study / safe_name(campaign)
    return str(store_table(table, folder, content_hash(table)))

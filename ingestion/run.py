"""`ingest_inbox`: one run over the inbox under the locks, with recovery of killed runs.

Temporary files of killed writes start with a dot, so dataset readers (pyarrow) skip them; the
next run removes them. A staged copy left by a run killed after its ledger record is archived by
the next run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ingestion.errors import IngestError
from ingestion.inbox import FileIdentity, hash_file, scan_inbox
from ingestion.job import Job, now
from ingestion.layout import LOCK, MANAGED, STAGING, check_folders
from ingestion.ledger import exclusive_lock
from ingestion.moves import move_no_overwrite
from ingestion.names import display_name
from ingestion.results import FileOutcome, IngestReport, Status
from ingestion.rules import campaign_or_problem
from ingestion.staging import DATA_SUFFIXES, check_locations
from ingestion.withdraw import finish_withdrawals
from ingestion.writers import open_for_writing, writer_note
from schemas.lab_files import FileLimits

Observed = tuple[str, Path, str, FileIdentity]


def remove_stale_temp_files(data_root: Path, ingested: set[str]) -> int:
    """Temporary files of writers killed mid-write (`.<name>.<random>.tmp`); lock held.

    A staged copy left by a run killed after its ledger record and before archiving is
    archived now (the ledger must never say "ingested" without an archived original)."""
    removed = 0
    for folder in (*MANAGED, STAGING):
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


def observe(
    inbox: Path, settle_seconds: float, campaign: str | None, limits: FileLimits
) -> tuple[list[Observed], list[FileOutcome]]:
    """First look at the inbox: candidates with their hash and identity, and skipped entries."""
    observed: list[Observed] = []
    skipped: list[FileOutcome] = []
    writing = open_for_writing(inbox)
    for entry in scan_inbox(inbox, settle_seconds=settle_seconds):
        shown = display_name(entry.name)
        reason = entry.skip_reason
        if reason is None and entry.name in writing:
            reason = writer_note(writing[entry.name])
        if reason is None and not entry.name.lower().endswith(DATA_SUFFIXES):
            reason = "not a .csv or .parquet file: left in place"
        if reason is None and campaign is not None:
            found, problem = campaign_or_problem(entry.name, source=shown)
            if found != campaign:
                why = f"campaign '{found}'" if found else str(problem)
                reason = f"{why}; not campaign '{campaign}': left in place"
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
        skipped.append(FileOutcome(shown, Status.skipped, message=reason))
    return observed, skipped


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
    """Ingest every new file in `inbox` into the dataset under `data_root` (see `ingestion`).

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
    started = now()
    outcomes: list[FileOutcome] = []

    def report(outcome: FileOutcome) -> None:
        outcomes.append(outcome)
        if on_file is not None:
            on_file(outcome)

    def run() -> None:
        job = Job(inbox, data_root, dry_run, limits)
        if not dry_run:
            remove_stale_temp_files(data_root, set(job.ingested))
            finish_withdrawals(data_root, job.ledger.read())
        observed, skipped = observe(inbox, settle_seconds, campaign, limits)
        for outcome in skipped:
            report(outcome)
        if settle_seconds > 0 and observed:
            wait(settle_seconds)
        writing = open_for_writing(inbox) if observed else {}  # again, after the wait
        for name, path, sha, identity in observed:
            if name in writing:
                report(FileOutcome(display_name(name), Status.skipped,
                                   message=writer_note(writing[name])))  # fmt: skip
                continue
            report(job.process(name, path, sha, identity))

    if dry_run:
        run()
    else:
        data_root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(data_root / LOCK), exclusive_lock(inbox):
            run()
    ordered = tuple(sorted(outcomes, key=lambda o: o.name))
    return IngestReport(str(inbox), str(data_root), dry_run, started, now(), ordered)

"""One ingestion job over the inbox: the crash-safe steps for each file.

Order of the steps for a new file: part (atomic write) -> ledger record (fsynced append, with
the inbox file's identity) -> archive the staged copy -> remove the inbox file. A re-run
completes a half-done job: a part without ledger record is reused and recorded; a ledger record
whose original is still in the inbox is finished by archiving it (`resumed`).
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from ingestion.campaign_shape import grown_from, part_shape, prefix_sha256, shape_of, shape_problem
from ingestion.errors import IngestError
from ingestion.inbox import FileIdentity, hash_file, unchanged
from ingestion.layout import (
    LEDGER,
    STAGING,
    archive_path,
    error_report_path,
    free_name,
    part_path,
)
from ingestion.ledger import Ledger, current_ingested
from ingestion.moves import move_no_overwrite, same_file
from ingestion.names import display_name, safe_name
from ingestion.results import FileOutcome, Status
from ingestion.rules import (
    DRIVE_COLUMNS,
    DRIVE_OPTIONAL,
    PRESS_COLUMNS,
    SOURCE_COLUMN,
    Study,
    campaign_or_problem,
    classify,
    validate,
)
from ingestion.staging import stage_copy
from ingestion.withdraw import take_out
from schemas.errors import DataError
from schemas.lab_files import FileLimits, check_size, read_limited, table_columns
from schemas.storage import fsync_dir, write_parquet_atomic, write_text_atomic


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Job:
    """One run over the inbox; `dry_run` decides everything but writes and moves nothing."""

    def __init__(self, inbox: Path, data_root: Path, dry_run: bool, limits: FileLimits) -> None:
        self.inbox, self.root, self.dry_run, self.limits = inbox, data_root, dry_run, limits
        self.ledger = Ledger(data_root / LEDGER)
        records = self.ledger.read()
        self.ingested = current_ingested(records)  # in the dataset now (withdrawals applied)
        self.duplicates = {
            (r["sha256"], r["name"]) for r in records if r.get("status") == "duplicate"
        }
        self.shapes: dict[str, dict[str, list[Any]] | None] = {}

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
        campaign, name_problem = campaign_or_problem(name, source=shown)
        try:
            columns = table_columns(staged, self.limits, source=shown)
            study = classify(columns, source=shown)
            wanted: tuple[str, ...] = (
                PRESS_COLUMNS if study is Study.press else DRIVE_COLUMNS + DRIVE_OPTIONAL
            )
            if not set(PRESS_COLUMNS if study is Study.press else DRIVE_COLUMNS) <= set(columns):
                wanted = tuple(columns)  # rejected anyway: let the message list every column
            frame = read_limited(staged, self.limits, columns=wanted, source=shown)
            table = validate(study, frame, source=shown)
        except Exception as exc:  # untrusted bytes: whatever breaks the reader is a reject
            message = (
                str(exc)
                if isinstance(exc, DataError)
                else f"{shown}: unexpected error while reading or validating "
                f"({type(exc).__name__}: {str(exc)[:300]}); please report it with this file"
            )
            message += f"\n{name_problem}" if name_problem else ""  # every problem at once
            return self._quarantine(name, staged, sha, message, original=path, identity=identity)
        if campaign is None:  # a name meant to name a campaign, but not a valid one
            return self._quarantine(
                name, staged, sha, str(name_problem), original=path, identity=identity
            )
        grown = grown_from(self.root, self.ingested, name, staged, identity.size)
        replaces = str(grown["sha256"]) if grown is not None else None
        misfit = self._misfit(shown, study, campaign, table, replaces)
        if misfit is not None:
            return self._quarantine(name, staged, sha, misfit, original=path, identity=identity)
        self.shapes.setdefault(sha, shape_of(study, table))
        return self._ingest(name, staged, sha, study, campaign, table, path, identity, replaces)

    def _misfit(
        self, shown: str, study: Study, campaign: str, table: pd.DataFrame, replaces: str | None
    ) -> str | None:
        """Why the file does not fit its campaign's data (`ingestion.campaign_shape`)."""
        for sha, record in self.ingested.items():
            if sha == replaces or (record.get("study"), record.get("campaign")) != (
                study.value,
                campaign,
            ):
                continue
            if sha not in self.shapes:
                self.shapes[sha] = part_shape(self.root, record)
            reference = self.shapes[sha]
            if not reference:
                continue  # drive, or a part that cannot be read: nothing to compare with
            first = f"{display_name(str(record.get('name')))} ({sha[:12]})"
            return shape_problem(shown, study.value, campaign, shape_of(study, table),
                                 reference, first)  # fmt: skip
        return None

    def _drop_original(
        self, name: str, path: Path, identity: FileIdentity, sha: str | None = None
    ) -> str:
        """Remove the inbox file once its staged copy is stored; a note for the report."""
        if self.dry_run:
            return ""
        if not os.path.lexists(path):
            return "; the inbox file had already been removed by someone else"
        if unchanged(path, identity):
            path.unlink(missing_ok=True)
            fsync_dir(path.parent)
            return ""
        if sha is not None and prefix_sha256(path, identity.size) == sha:
            # It grew (an upload that stalled, then went on): left in the inbox, so the next
            # run ingests it whole and replaces the part taken now (`campaign_shape.grown_from`).
            return (
                "; the inbox file grew meanwhile: left in the inbox, the next run ingests it whole"
            )
        # Rewritten after it was taken: keep the new bytes, but out of the inbox, so the next
        # run does not ingest the old rows a second time.
        target = free_name(self.root / "quarantine", safe_name(name), "changed")
        with contextlib.suppress(FileNotFoundError):
            write_text_atomic(
                f"file: {display_name(name)}\nquarantined: {now()}\n\nproblem:\nthe file "
                "changed after it was taken for ingestion; its earlier content is ingested and "
                "archived. Check which rows are new and drop only those into the inbox.\n",
                error_report_path(target),
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
        replaces: str | None = None,
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
        if replaces is not None:
            record["replaces"] = replaces
        note = ""
        if not self.dry_run:
            if not unchanged(original, identity) and os.path.lexists(original):
                staged.unlink(missing_ok=True)
                return FileOutcome(
                    display_name(name), Status.skipped, sha, message="changed while being read"
                )
            if not part_is_complete(part, len(table)):
                write_parquet_atomic(table.assign(**{SOURCE_COLUMN: sha}), part)
                fsync_dir(part.parent)
            self.ledger.append({**record, "source": identity_list(identity), "time": now()})
            if replaces is not None:  # the partial file it grew from: out of the dataset
                take_out(self.root, replaces, self.ingested[replaces].get("part"))
            self._archive(staged, sha, name)
            note = self._drop_original(name, original, identity, sha)
        if replaces is not None:
            old = self.ingested.pop(replaces)
            note += f"; replaces the {old.get('rows')} rows taken while it was still growing"
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
        same = known.get("source") == identity_list(identity) or same_file(path, archived)
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
                        "time": now(),
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
        target = free_name(folder, safe_name(name), sha)
        if not self.dry_run:
            report = (
                f"file: {display_name(name)}\nsha256: {sha}\nquarantined: {now()}\n"
                f"quarantined as: {target.name}\n\nproblem:\n{error}\n\n"
                "Fix the file and drop it into the inbox again (under any name).\n"
            )
            while True:
                write_text_atomic(report, error_report_path(target))
                try:
                    move_no_overwrite(path, target)
                    break
                except FileExistsError:  # taken in between by someone else: next free name
                    target = free_name(folder, safe_name(name), sha)
                except FileNotFoundError:  # the original vanished: nothing to set aside
                    error_report_path(target).unlink(missing_ok=True)
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
                    "time": now(),
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
        return archive_path(self.root, sha, name)

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


def identity_list(identity: FileIdentity) -> list[int]:
    return [identity.dev, identity.ino, identity.size, identity.mtime_ns]


def _sha_of(path: Path) -> str | None:
    try:
        return hash_file(path)[0]
    except (OSError, IngestError):
        return None


def part_is_complete(path: Path, rows: int) -> bool:
    """A part left by an interrupted run is reused if it is a readable Parquet file with the
    expected row count (it is named by content, so it holds the same rows)."""
    if not path.exists():
        return False
    try:
        return pq.read_metadata(path).num_rows == rows
    except Exception:  # truncated or foreign file: rewrite it atomically
        return False

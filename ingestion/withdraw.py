"""Taking an ingested file back out of the dataset (`greylab ingest withdraw FILE|HASH`).

A file is named by its content hash (the full SHA-256, or a prefix of at least 8 hex digits),
by the name it was ingested under, by its archived original (`archive/<sha256>-<name>`), or by
the path of a copy of the file itself (its bytes are hashed). Anything else, or a name that
several ingested files share, is refused (`IngestError`, exit 2) and nothing changes.

Steps, under the data root's ingestion lock (one run at a time):

1. ledger record `withdrawn` (fsynced append): the commit point; from here on the ledger's
   readers (`campaign_table`, `--trigger-studies`, the next ingestion) no longer see the file;
2. the dataset part `datasets/.../part-<sha256>.parquet` is removed;
3. the archived originals `archive/<sha256>-*` move to `withdrawn/` (kept, never deleted: fix
   the file and drop it into the inbox again; the same content is then ingested again).

A run killed between the steps is completed by the next ingestion run (`finish_withdrawals`)
or by withdrawing again: withdrawing twice is harmless (`already withdrawn`, the leftovers
are taken out). A file that grew after it was taken is replaced the same way (`replaces` in
the new file's ledger record; `ingestion.job`).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ingestion.errors import IngestError
from ingestion.inbox import hash_file
from ingestion.layout import LEDGER, LOCK
from ingestion.ledger import WITHDRAWN, Ledger, current_ingested, exclusive_lock, taken_out
from ingestion.moves import move_no_overwrite
from ingestion.names import display_name
from schemas.storage import fsync_dir

WITHDRAWN_DIR = "withdrawn"
_HEX = re.compile(r"^[0-9a-f]{8,64}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_QUOTE = 120


@dataclass(frozen=True)
class Withdrawal:
    """What `withdraw` did: `status` is `withdrawn` or `already withdrawn`; `moved` the
    archived originals now under `withdrawn/` (relative to the data root)."""

    sha256: str
    name: str
    study: str | None
    campaign: str | None
    rows: int
    status: str
    part: str | None
    moved: tuple[str, ...]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "moved": list(self.moved)}


def _quoted(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= _QUOTE else shown[: _QUOTE - 4] + "...'"


def resolve(reference: str, records: list[dict[str, Any]], data_root: Path) -> dict[str, Any]:
    """The last `ingested` record of the file `reference` names (module docstring)."""
    ingested = [r for r in records if r.get("status") == "ingested" and "sha256" in r]
    by_sha = {r["sha256"]: r for r in ingested}
    text = reference.strip()
    candidates: set[str] = set()
    if _HEX.match(text.lower()):
        candidates = {s for s in by_sha if s.startswith(text.lower())}
    name = Path(text).name
    if not candidates and _HEX.match(name[:64].lower()) and name[64:65] == "-":
        candidates = {s for s in by_sha if s == name[:64].lower()}  # an archived original
    if not candidates:
        current = current_ingested(records)
        candidates = {s for s, r in current.items() if r.get("name") == name}
        if not candidates:
            candidates = {s for s, r in by_sha.items() if r.get("name") == name}
    if not candidates and os.path.isfile(text):
        try:
            sha = hash_file(Path(text))[0]
        except OSError as exc:
            raise IngestError(f"withdraw {_quoted(text)}: cannot be read ({exc})") from None
        candidates = {sha} if sha in by_sha else set()
    if len(candidates) > 1:
        shown = ", ".join(
            f"{s[:12]} ({display_name(str(by_sha[s].get('name')))})" for s in sorted(candidates)
        )
        raise IngestError(
            f"withdraw {_quoted(text)}: names {len(candidates)} ingested files of {data_root} "
            f"({shown}); give the content hash of the one to withdraw"
        )
    if not candidates:
        raise IngestError(
            f"withdraw {_quoted(text)}: not an ingested file of {data_root}: no ledger record "
            "with that content hash (at least 8 hex digits), name or archived original, and no "
            "such file with ingested content; see ledger.jsonl"
        )
    return by_sha[candidates.pop()]


def withdraw(data_root: str | Path, reference: str) -> Withdrawal:
    """Take the ingested file `reference` out of the dataset (module docstring)."""
    root = Path(data_root)
    if not (root / LEDGER).is_file():
        raise IngestError(f"withdraw: {root} has no ledger.jsonl: nothing was ingested there")
    with exclusive_lock(root / LOCK):
        ledger = Ledger(root / LEDGER)
        records = ledger.read()
        record = resolve(reference, records, root)
        sha = record["sha256"]
        current = sha in current_ingested(records)
        if current:
            ledger.append(
                {
                    "sha256": sha,
                    "name": record.get("name"),
                    "study": record.get("study"),
                    "campaign": record.get("campaign"),
                    "rows": 0,
                    "status": WITHDRAWN,
                    "part": record.get("part"),
                    "withdrawn_rows": record.get("rows", 0),
                    "time": _now(),
                }
            )
        moved = take_out(root, sha, record.get("part"))
    shown = display_name(str(record.get("name")))
    where = f"{record.get('study')}/{record.get('campaign')}"
    message = (
        f"{shown} ({sha[:12]}): {record.get('rows', 0)} rows taken out of {where}"
        if current
        else f"{shown} ({sha[:12]}): already withdrawn from {where}"
    )
    if moved:
        message += f"; original kept as {', '.join(moved)}"
    return Withdrawal(
        sha256=sha,
        name=str(record.get("name")),
        study=record.get("study"),
        campaign=record.get("campaign"),
        rows=int(record.get("rows", 0) or 0),
        status=WITHDRAWN if current else f"already {WITHDRAWN}",
        part=record.get("part"),
        moved=tuple(moved),
        message=message,
    )


def take_out(root: Path, sha: str, part: str | None) -> list[str]:
    """Steps 2 and 3 for a file the ledger no longer counts (idempotent); lock held. Only a
    part of that hash under `datasets/` and archived originals of that hash are touched,
    whatever the ledger says (it is a file in the data root, writable by the lab)."""
    if not _SHA256.match(sha):
        return []
    if part:
        path = root / part
        datasets = (root / "datasets").resolve()
        inside = datasets in path.resolve().parents
        if (
            inside
            and path.name == f"part-{sha}.parquet"
            and path.is_file()
            and not path.is_symlink()
        ):
            path.unlink()
            fsync_dir(path.parent)
    moved: list[str] = []
    archive = root / "archive"
    if archive.is_dir():
        for original in sorted(archive.glob(f"{sha}-*")):
            if not original.is_file() or original.is_symlink():
                continue
            target = root / WITHDRAWN_DIR / original.name
            for attempt in range(1, 1000):
                try:
                    move_no_overwrite(original, target)
                    break
                except FileExistsError:
                    target = target.with_name(f"{original.name}.{attempt}")
            moved.append(str(target.relative_to(root)))
    return moved


def finish_withdrawals(root: Path, records: list[dict[str, Any]]) -> int:
    """Complete withdrawals and replacements interrupted by a crash; lock held. Returns how
    many files were taken out now."""
    out = taken_out(records)
    if not out:
        return 0
    parts = {r["sha256"]: r.get("part") for r in records if r.get("sha256") in out}
    done = 0
    for sha in sorted(out):
        part = parts.get(sha)
        leftover = bool(part) and (root / str(part)).exists()
        moved = take_out(root, sha, part)
        done += int(leftover or bool(moved))
    return done


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")

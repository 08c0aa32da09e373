"""The ledger (JSON Lines, one record per file outcome) and the lock of one run at a time.

The ledger is appended with one `write` per record and fsynced. A record torn by a crash (no
final newline) is ignored and cut off at the next locked append.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingestion.errors import IngestBusyError, IngestError

#: ledger statuses that take an ingested file's content out of the dataset
WITHDRAWN = "withdrawn"


def current_ingested(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{sha256: record}` of the files whose rows are in the dataset now, in ledger order.

    A record `ingested` adds its file (and, with `replaces`, takes out the partial file it
    replaces: an upload that grew after it was taken); a record `withdrawn` (`greylab ingest
    withdraw`) takes its file out. Content withdrawn and dropped again is ingested again.
    """
    current: dict[str, dict[str, Any]] = {}
    for record in records:
        sha, status = record.get("sha256"), record.get("status")
        if not isinstance(sha, str):
            continue
        if status == "ingested":
            current.pop(sha, None)  # re-ingested after a withdrawal: now in ledger order
            current[sha] = record
            replaced = record.get("replaces")
            if isinstance(replaced, str) and replaced != sha:
                current.pop(replaced, None)
        elif status == WITHDRAWN:
            current.pop(sha, None)
    return current


def taken_out(records: list[dict[str, Any]]) -> set[str]:
    """Hashes once ingested and now out of the dataset (withdrawn or replaced)."""
    ever = {r["sha256"] for r in records if r.get("status") == "ingested" and "sha256" in r}
    return ever - set(current_ingested(records))


class Ledger:
    """Append-only JSON Lines ledger: one record per file outcome.

    Records hold at least `sha256`, `name`, `study`, `campaign`, `rows`, `status`, `time`.
    `append` writes one line with a single `write` call and fsyncs it; a torn last line (a
    crash mid-write) is ignored on reading and removed by the next `append`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        raw = self.path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        records = []
        for number, line in enumerate(complete.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise IngestError(
                    f"{self.path}: line {number} is not valid JSON ({exc}); "
                    "repair or move the ledger before ingesting again"
                ) from None
        return records

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size:
                os.lseek(fd, size - 1, os.SEEK_SET)
                if os.read(fd, 1) != b"\n":  # torn record from a crash: cut it off
                    content = self.path.read_bytes()
                    os.ftruncate(fd, content.rfind(b"\n") + 1)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an advisory lock on `path` (released by the kernel if the process dies).

    A folder is locked itself (no lock file is created in it: used for the inbox, which two
    data roots may share)."""
    if path.is_dir():
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        where = path
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        where = path.parent
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IngestBusyError(
                f"another ingestion run is working on {where} (lock {path.name}); "
                "try again when it has finished"
            ) from None
        yield
    finally:
        os.close(fd)

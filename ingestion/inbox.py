"""The inbox: which entries are candidates, and each file's identity and content hash.

Only regular files directly in the inbox are read. Symlinks are never followed (checked with
`lstat` at scan time, and the file is opened with `O_NOFOLLOW`), folders are not descended,
hidden files (`.name`), editor backups (`name~`) and uploads in progress (`name.csv.part`:
the uploader renames the file when it is complete) are left alone.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ingestion.errors import IngestError
from ingestion.names import display_name

#: an upload in progress: never taken (the uploader renames the file when it is complete)
PART_SUFFIX = ".part"


@dataclass(frozen=True)
class InboxEntry:
    """One directory entry of the inbox: a candidate file, or a reason it is left alone."""

    name: str
    path: Path
    skip_reason: str | None = None


def scan_inbox(
    inbox: Path, *, settle_seconds: float = 0.0, now: float | None = None
) -> list[InboxEntry]:
    """Entries directly in `inbox`, sorted by name; non-candidates carry a `skip_reason`.

    Files modified less than `settle_seconds` ago are skipped (an upload may still be running);
    the next scheduled run picks them up.
    """
    import time

    now = time.time() if now is None else now
    entries: list[InboxEntry] = []
    with os.scandir(inbox) as it:
        for entry in it:
            path = Path(entry.path)
            reason = None
            if entry.is_symlink():
                reason = "symbolic link: not followed"
            elif entry.is_dir(follow_symlinks=False):
                reason = "folder: only files directly in the inbox are read"
            elif not entry.is_file(follow_symlinks=False):
                reason = "not a regular file"
            elif entry.name.startswith(".") or entry.name.endswith("~"):
                reason = "hidden or temporary file: left alone"
            elif entry.name.lower().endswith(PART_SUFFIX):
                reason = (
                    f"upload in progress ({PART_SUFFIX}): never taken; the uploader renames it "
                    "to its .csv/.parquet name when complete"
                )
            else:
                age = now - entry.stat(follow_symlinks=False).st_mtime
                if age < settle_seconds:
                    reason = f"modified {age:.0f} s ago: waiting for the upload to finish"
            entries.append(InboxEntry(entry.name, path, reason))
    return sorted(entries, key=lambda e: e.name)


@dataclass(frozen=True)
class FileIdentity:
    """What the file was when we hashed it; reading it again must give the same identity."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def hash_file(path: Path) -> tuple[str, FileIdentity]:
    """SHA-256 of a regular file's bytes, opened without following symlinks.

    Raises `FileNotFoundError` if it vanished, `IngestError` if it is not a regular file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IngestError(f"{display_name(path.name)}: symbolic link: not followed") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise IngestError(f"{display_name(path.name)}: not a regular file")
        digest = hashlib.sha256()
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest(), FileIdentity.of(st)


def unchanged(path: Path, identity: FileIdentity) -> bool:
    """True if `path` is still the same regular file (not swapped, not rewritten)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISREG(st.st_mode) and FileIdentity.of(st) == identity

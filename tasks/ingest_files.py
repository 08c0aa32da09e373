"""File handling for ingestion: untrusted inbox entries, no-overwrite moves, the ledger, a lock.

Everything an inbox can contain is untrusted: names may hold path separators of other systems,
control characters, leading dots or `..`; entries may be symlinks, folders, FIFOs, or files still
being uploaded. The rules here:

- Only regular files directly in the inbox are read. Symlinks are never followed (checked with
  `lstat` at scan time, and the file is opened with `O_NOFOLLOW`), folders are not descended,
  hidden files (`.name`) and editor backups (`name~`) are left alone (uploads in progress often
  use such names).
- Names written to the archive and the quarantine are sanitised by `safe_name`: only
  `[A-Za-z0-9._-]`, no leading dot, at most 120 characters, never a path.
- `move_no_overwrite` never replaces an existing file: it hard-links (which fails if the target
  exists) and then unlinks the source; across file systems it copies to a temporary file in the
  target folder, fsyncs, and links that.
- The ledger is JSON Lines, appended with one `write` per record and fsynced. A record torn by a
  crash (no final newline) is ignored and cut off at the next locked append.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from methods.errors import InputError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_LIMIT = 120


class IngestError(InputError):
    """Ingestion cannot start or continue (bad inbox, busy, broken ledger); the message says why."""


class IngestBusyError(IngestError):
    """Another ingestion run holds the lock on this data root."""


def safe_name(name: str, *, limit: int = _NAME_LIMIT) -> str:
    """A file name that is safe to create in our folders: `[A-Za-z0-9._-]`, no leading dot.

    Path separators, control characters and anything else are replaced by `_`; the extension
    is kept when the name must be shortened. Never empty, never `.`/`..`, never hidden.
    """
    text = unicodedata.normalize("NFKC", name).replace("/", "_").replace("\\", "_")
    text = _UNSAFE.sub("_", text).lstrip(".")
    text = re.sub(r"\.{2,}", ".", text)
    if not text.strip("._-"):
        text = "file" + text
    if len(text) > limit:
        stem, dot, suffix = text.rpartition(".")
        if dot and 0 < len(suffix) <= 10:
            text = stem[: limit - len(suffix) - 1] + "." + suffix
        else:
            text = text[:limit]
    return text


def display_name(name: str) -> str:
    """A name for reports and logs: printable, quoted with repr when it contains odd characters."""
    return name if name.isprintable() and name.strip() == name else repr(name)


# -- scanning the inbox ---------------------------------------------------------------------


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


# -- durable writes and moves ---------------------------------------------------------------


def fsync_dir(folder: Path) -> None:
    """Make a rename/link in `folder` durable (POSIX needs the directory fsynced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text_atomic(text: str, path: Path) -> Path:
    """Write a small text file: temp file in the same folder, fsync, rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def move_no_overwrite(src: Path, dst: Path) -> Path:
    """Move `src` to `dst`; raise `FileExistsError` rather than replace an existing `dst`."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
            raise
        _copy_no_overwrite(src, dst)
    fsync_dir(dst.parent)
    os.unlink(src)
    fsync_dir(src.parent)
    return dst


def _copy_no_overwrite(src: Path, dst: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
            shutil.copyfileobj(inp, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, dst)
        except FileExistsError:
            raise
        except OSError:
            if dst.exists():
                raise FileExistsError(errno.EEXIST, "target exists", str(dst)) from None
            os.rename(tmp, dst)
    finally:
        Path(tmp).unlink(missing_ok=True)


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# -- the ledger -----------------------------------------------------------------------------


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

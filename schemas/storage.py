"""Atomic writes and content-addressed table storage (Parquet): the project's one atomic writer.

A write goes to a temporary file `.<name>.<random>.tmp` in the target folder, is flushed to
disk, then renamed over the target, and the folder is fsynced: readers see the old file or the
new one, never half of one, even if the writer is killed mid-write. Temporary files start with
a dot, so dataset readers (pyarrow) skip those left by a killed writer.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the atomic writer serves stdlib-only callers too
    import pandas as pd


def fsync_dir(folder: str | Path) -> None:
    """Make a rename/link in `folder` durable (POSIX needs the directory fsynced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(
    path: str | Path,
    write: Callable[[IO[bytes]], Any],
    *,
    readable: bool = False,
    replace: bool = True,
) -> Path:
    """Write `path` with `write(handle)`: temp file in the same folder, fsync, rename, fsync
    the folder. On any error the temp file is removed and `path` is left as it was.
    `readable`: mode 0666 minus the umask (a user's output file) instead of the temp file's
    0600. `replace=False`: an existing `path` is never replaced, not even by a writer racing
    this one (the file is linked into place; FileExistsError)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            if readable:
                os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def _link_new(tmp: str, path: Path) -> None:
    """`tmp` into place as `path` only if `path` does not exist (FileExistsError). A file
    system without hard links: checked, then renamed (a writer racing in between may lose)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:
        if path.exists() or path.is_symlink():
            raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
        os.replace(tmp, path)


def current_umask() -> int:
    """The process's umask, read without changing it (Linux: /proc; else 022)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def write_parquet_atomic(frame: pd.DataFrame, path: str | Path) -> Path:
    return write_atomic(path, lambda handle: frame.to_parquet(handle, index=False))


def write_text_atomic(text: str, path: str | Path) -> Path:
    """A small UTF-8 text file, written atomically."""
    return write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))


def content_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of a table's content (values, column names and dtypes; not the index)."""
    import pandas as pd

    hashed = pd.util.hash_pandas_object(frame.reset_index(drop=True), index=False)
    digest = hashlib.sha256(hashed.to_numpy().tobytes())
    digest.update(json.dumps([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode())
    return digest.hexdigest()


def store_table(frame: pd.DataFrame, folder: str | Path, digest: str) -> Path:
    """Store `frame` as `<folder>/<digest>.parquet` once; an existing copy is reused."""
    path = Path(folder) / f"{digest}.parquet"
    if not path.exists():
        write_parquet_atomic(frame, path)
    return path

"""Atomic writes and content-addressed table storage (Parquet): the project's one atomic writer.

A write goes to a temporary file `.<name>.<random>.tmp` in the target folder, is flushed to
disk, then renamed over the target, and the folder is fsynced: readers see the old file or the
new one, never half of one, even if the writer is killed mid-write. Temporary files start with
a dot, so dataset readers (pyarrow) skip those left by a killed writer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pandas as pd


def fsync_dir(folder: str | Path) -> None:
    """Make a rename/link in `folder` durable (POSIX needs the directory fsynced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: str | Path, write: Callable[[IO[bytes]], Any]) -> Path:
    """Write `path` with `write(handle)`: temp file in the same folder, fsync, rename, fsync
    the folder. On any error the temp file is removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def write_parquet_atomic(frame: pd.DataFrame, path: str | Path) -> Path:
    return write_atomic(path, lambda handle: frame.to_parquet(handle, index=False))


def write_text_atomic(text: str, path: str | Path) -> Path:
    """A small UTF-8 text file, written atomically."""
    return write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))


def store_table(frame: pd.DataFrame, folder: str | Path, digest: str) -> Path:
    """Store `frame` as `<folder>/<digest>.parquet` once; an existing copy is reused."""
    path = Path(folder) / f"{digest}.parquet"
    if not path.exists():
        write_parquet_atomic(frame, path)
    return path

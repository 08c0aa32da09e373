"""Atomic, content-addressed table storage (Parquet).

A write goes to a temporary file in the target folder, is flushed to disk, then renamed over
the target: readers see the old file or the new one, never half of one, even if the writer is
killed mid-write.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd


def write_parquet_atomic(frame: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            frame.to_parquet(handle, index=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def store_table(frame: pd.DataFrame, folder: str | Path, digest: str) -> Path:
    """Store `frame` as `<folder>/<digest>.parquet` once; an existing copy is reused."""
    path = Path(folder) / f"{digest}.parquet"
    if not path.exists():
        write_parquet_atomic(frame, path)
    return path

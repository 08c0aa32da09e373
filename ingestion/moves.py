"""Moves that never replace an existing file.

`move_no_overwrite` hard-links (which fails if the target exists) and then unlinks the source;
across file systems it copies to a temporary file in the target folder, fsyncs, and links that.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from schemas.storage import fsync_dir


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

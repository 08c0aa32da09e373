"""Where the inbox and data root may be, and staged copies of inbox files.

- `check_locations`: the inbox and the data root must not be the project folder, a folder on
  `sys.path`, or reachable from either through importable names (`data/quarantine/x.py` would
  be `import data.quarantine.x`). Hidden folders (`.greylab/data`) are not importable.
- `stage_copy`: a file is copied (never followed through a symlink) into `<data root>/.staging`
  and hashed while copied; ingestion reads, archives and quarantines that copy, so the hash in
  the ledger is the hash of what was stored, whatever happens to the inbox file meanwhile.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path

from ingestion.errors import IngestError
from ingestion.inbox import FileIdentity
from ingestion.names import display_name
from schemas.storage import fsync_dir

DATA_SUFFIXES = (".csv", ".parquet")
PROJECT_DIR = Path(__file__).resolve().parents[1]


def _import_roots() -> list[Path]:
    roots = {PROJECT_DIR}
    for entry in sys.path:
        try:
            path = Path(entry or os.getcwd()).resolve()
        except OSError:
            continue
        if path.is_dir():
            roots.add(path)
    return sorted(roots)


def importable_from(folder: Path) -> Path | None:
    """The project folder or `sys.path` entry from which files in `folder` could be imported."""
    folder = folder.resolve()
    for root in _import_roots():
        if folder == root:
            return root
        if root in folder.parents:
            if all(part.isidentifier() for part in folder.relative_to(root).parts):
                return root
    return None


def check_locations(inbox: Path, data_root: Path) -> None:
    """Refuse an inbox or data root on the Python import path or the project folder itself."""
    for label, folder in (("inbox", inbox), ("data root", data_root)):
        root = importable_from(folder)
        if root is not None:
            raise IngestError(
                f"{label} {folder} is on the Python import path (under {root}): files moved "
                "there could be imported as code; use a folder outside the project and "
                "sys.path, or a hidden one such as .greylab/data"
            )


def stage_copy(path: Path, staging: Path, safe: str) -> tuple[Path, str, FileIdentity]:
    """Copy `path` (no symlinks) to `staging/<sha256>-<safe>`, hashing the copied bytes.

    Returns (staged path, sha256, identity of the source while it was read). Raises
    `FileNotFoundError` if it vanished, `IngestError` if it is not a regular file.
    """
    staging.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise IngestError(f"{display_name(path.name)}: cannot be opened ({exc.strerror})") from None
    out_fd, tmp = tempfile.mkstemp(prefix=".stage-", suffix=".tmp", dir=staging)
    try:
        with os.fdopen(fd, "rb") as src, os.fdopen(out_fd, "wb") as out:
            st = os.fstat(src.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise IngestError(f"{display_name(path.name)}: not a regular file")
            digest = hashlib.sha256()
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
            after = os.fstat(src.fileno())
        sha = digest.hexdigest()
        staged = staging / f"{sha}-{safe}"
        os.replace(tmp, staged)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(staging)
    identity = FileIdentity.of(st)
    if FileIdentity.of(after) != identity:
        staged.unlink(missing_ok=True)
        raise IngestError(f"{display_name(path.name)}: changed while being copied")
    return staged, sha, identity

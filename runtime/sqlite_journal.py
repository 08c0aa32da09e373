"""Write-ahead logging for greylab's local SQLite MLflow store (issue 31).

MLflow's SQLite store commits each call (a tag, a batch, a run's start or end) in its own
transaction. In SQLite's default rollback-journal mode a commit writes and syncs the journal
and the database: 12-20 ms a call on this machine, about 80 commits in one `press detect`.
In WAL mode a commit appends to `mlflow.db-wal` and syncs it once: 2-3x less per call
(`benchmarks/sqlite_journal.py`), with the same durability (`synchronous` stays FULL:
a committed run survives a power cut) and readers that no longer block the writer.

The mode is a property of the database file: set once, it holds for every later connection,
MLflow's server and `sqlite3` included. greylab sets it when it opens its own store
(`runtime.stores.tracking_client`), never on a store given by `MLFLOW_TRACKING_URI` elsewhere
than on a local disk: WAL needs shared memory between the processes that open the file, which
a network filesystem (NFS, SMB, sshfs, ...) does not give, so there the store keeps its
rollback journal. While a process has the store open, its recent commits may sit in
`mlflow.db-wal` beside it: a backup copies both files, or uses `sqlite3 mlflow.db ".backup
copy.db"` (docs/operations.md); the last connection to close folds the log back in.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: filesystem types (``/proc/self/mounts``) without the shared memory WAL needs
NETWORK_FILESYSTEMS = frozenset(
    "nfs nfs4 cifs smb3 smbfs ncpfs afs 9p glusterfs ceph lustre gpfs beegfs davfs virtiofs".split()
)


SQLITE_MAGIC = b"SQLite format 3\x00"


def header_problem(header: bytes, size: int) -> str | None:
    """What is wrong with a non-empty SQLite file of `size` bytes whose first 100 bytes are
    `header` ("not a SQLite database", "truncated: ..."), None when it looks whole."""
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        return "not a SQLite database"
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = pages > 0 and header[24:28] == header[92:96]
    if valid and size < pages * page:
        return f"truncated: {size} bytes, its header says {pages * page}"
    return None


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding `path` (the longest mount point above it in
    `mounts`, default ``/proc/self/mounts``); None when it cannot be told."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    target = str(path.resolve())
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def local_disk(path: Path, mounts: str | None = None) -> bool:
    """Whether `path` is on a filesystem WAL works on (known and not a network or FUSE one)."""
    kind = filesystem_type(path, mounts)
    return kind is not None and kind not in NETWORK_FILESYSTEMS and not kind.startswith("fuse")


def use_write_ahead_log(db: Path, timeout: float = 5.0) -> str:
    """Put the SQLite database `db` (it exists) in WAL mode when it is on a local disk; its
    journal mode afterwards (``wal``, or what it was: a network filesystem, or another process
    holding a transaction past `timeout`, leave it as it was; greylab works either way)."""
    try:
        con = sqlite3.connect(db, timeout=timeout)
    except sqlite3.Error:
        return "unknown"
    try:
        mode = str(con.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if mode != "wal" and local_disk(db.parent):
            mode = str(con.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        return mode
    except sqlite3.Error:
        return "unknown"
    finally:
        con.close()

"""The local MLflow store in SQLite's WAL mode (runtime.sqlite_journal, issue 31)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import sqlite_journal
from runtime.settings import load_settings
from runtime.sqlite_journal import filesystem_type, local_disk, use_write_ahead_log
from runtime.stores import tracking_client

MOUNTS = r"""/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
server:/export/home /home/lab nfs4 rw,vers=4.2 0 0
/dev/vdb /home/lab/local\040disk xfs rw 0 0
sshfs#me@host: /mnt/remote fuse.sshfs rw 0 0
"""


def _mode(db: Path) -> str:
    with sqlite3.connect(db) as con:
        return str(con.execute("PRAGMA journal_mode").fetchone()[0])


def test_the_filesystem_is_the_longest_mount_point_above_the_path() -> None:
    assert filesystem_type(Path("/srv/x/mlflow.db"), MOUNTS) == "ext4"
    assert filesystem_type(Path("/home/lab/.greylab"), MOUNTS) == "nfs4"
    assert filesystem_type(Path("/home/lab/local disk/.greylab"), MOUNTS) == "xfs"
    assert filesystem_type(Path("/home/labmate"), MOUNTS) == "ext4"  # not under /home/lab
    assert filesystem_type(Path("/x"), "garbage\n\n") is None
    assert local_disk(Path("/srv/x"), MOUNTS)
    assert not local_disk(Path("/home/lab/.greylab"), MOUNTS)
    assert not local_disk(Path("/mnt/remote/store"), MOUNTS)
    assert not local_disk(Path("/x"), "")  # unknown: keep the rollback journal


def test_greylab_opens_its_store_in_wal_mode_and_mlflow_keeps_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("GREYLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    client = tracking_client(load_settings())
    db = home / "mlflow.db"
    assert _mode(db) == "wal"
    experiment = client.create_experiment("journal")
    run = client.create_run(experiment).info.run_id
    client.log_metric(run, "rss", 1.5)
    client.set_terminated(run)
    # another process (a dashboard's MLflow, a later command) reads what was committed
    code = (
        "import sys, sqlite3; con = sqlite3.connect(sys.argv[1]); "
        "print(con.execute('select value from metrics').fetchone()[0])"
    )
    out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True)
    assert out.stdout.strip() == "1.5", out.stderr
    assert tracking_client(load_settings()).get_run(run).data.metrics == {"rss": 1.5}


def test_a_store_on_a_network_filesystem_keeps_its_rollback_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "mlflow.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()
    monkeypatch.setattr(sqlite_journal, "local_disk", lambda path, mounts=None: False)
    assert use_write_ahead_log(db) == "delete"
    assert _mode(db) == "delete"
    monkeypatch.undo()
    assert use_write_ahead_log(db) == "wal"
    assert use_write_ahead_log(db) == "wal"  # once set, it stays (and is not set again)


def test_a_store_locked_by_another_writer_is_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    writer = sqlite3.connect(db)
    writer.execute("create table t (x)")
    writer.commit()
    writer.execute("begin exclusive")  # another process in the middle of a transaction
    try:
        assert use_write_ahead_log(db, timeout=0.2) in ("delete", "unknown")
    finally:
        writer.rollback()
        writer.close()
    assert _mode(db) == "delete"

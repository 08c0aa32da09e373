"""The stores greylab creates on first use (issue 28, items 4, 9 and 10).

- Two first runs on a fresh GREYLAB_HOME raced the MLflow store's creation ("duplicate column
  name: step", "Online migration expected to match one row"): now N first runs at once all
  succeed and all their runs are in the store (`runtime.stores.tracking_client` creates the
  store under `mlflow.db.lock`; `runtime.server_guard` does the same for Prefect's database).
- A run whose process was SIGKILLed stayed RUNNING forever: the next start marks it KILLED.
- A read-only GREYLAB_HOME retried for ~100 s and ended with a misleading message: now exit 2
  at once, naming the folder. A truncated `mlflow.db` (infrastructure) exits 1 naming it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.settings import load_settings
from runtime.stores import StoreError, check_sqlite_file

GREYLAB = Path(sys.executable).parent / "greylab"

FIRST_RUN = """
import sys
from tracking.mlflow_tracker import Tracker
tracker = Tracker()
tracker.ensure_store()
run = tracker.start_run("race", "first", study="press")
tracker.end_run(run)
print(run)
"""


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "GREYLAB_HOME": str(home)}
    for key in ("MLFLOW_TRACKING_URI", "PREFECT_API_URL", "PREFECT_HOME", "GREYLAB_CACHE_DIR"):
        env.pop(key, None)
    return env


def _python(code: str, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-P", "-c", code], env=_env(home), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _runs(home: Path) -> dict[str, str]:
    with sqlite3.connect(home / "mlflow.db") as db:
        return dict(db.execute("select run_uuid, status from runs").fetchall())


def test_six_first_runs_at_once_on_a_fresh_home_all_succeed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    procs = [_python(FIRST_RUN, home) for _ in range(6)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-1500:]
    ids = {out.strip() for out, _ in outputs}
    assert len(ids) == 6
    assert {run: status for run, status in _runs(home).items() if run in ids} == dict.fromkeys(
        ids, "FINISHED"
    )


@pytest.mark.integration
@pytest.mark.usefixtures("own_prefect_server")  # Prefect's database created on first use
def test_four_press_detect_first_runs_at_once_all_succeed(tmp_path: Path) -> None:
    """The CLI end to end: MLflow store and Prefect's database both created on first use."""
    home = tmp_path / "home"
    procs = [
        subprocess.Popen(
            [str(GREYLAB), "press", "detect", "--model", "M1", "--tests", "2", "--json"],
            cwd=tmp_path,
            env=_env(home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, "\n".join(e[-800:] for e in errors)
    with sqlite3.connect(home / "mlflow.db") as db:
        parents = db.execute(
            "select count(*) from runs r join tags t on r.run_uuid = t.run_uuid "
            "where t.key = 'greylab.kind' and t.value = 'parent' and r.status = 'FINISHED'"
        ).fetchone()[0]
    assert parents == 4


KILLED_RUN = """
import os, signal
from tracking.mlflow_tracker import Tracker
tracker = Tracker()
tracker.ensure_store()
print(tracker.start_run("race", "doomed", study="press"), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_run_of_a_killed_process_is_marked_killed_on_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    doomed = _python(KILLED_RUN, home)
    out, err = doomed.communicate(timeout=300)
    assert doomed.returncode == -9, err[-1500:]
    killed = out.strip()
    assert _runs(home)[killed] == "RUNNING"

    from runtime import stores
    from tracking.mlflow_tracker import Tracker

    monkeypatch.setenv("GREYLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(stores, "_REAPED", set())
    settings = load_settings()
    live = Tracker(settings)
    mine = live.start_run("race", "alive", study="press")  # this process: alive
    other = live.start_run("race", "elsewhere", study="press", tags={"x": "1"})
    live.client.set_tag(other, stores.TAG_HOST, "another-host")  # never judged from here
    Tracker(settings).ensure_store()  # "the next start"
    runs = _runs(home)
    assert runs[killed] == "KILLED"
    assert runs[mine] == "RUNNING" and runs[other] == "RUNNING"
    assert "owner process gone" in live.client.get_run(killed).data.tags["greylab.killed"]


def _ro_mount(folder: Path, command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    script = f'mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec "$@"'
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", *command], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _can_mount_read_only(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        done = _ro_mount(probe, ["sh", "-c", f"! touch {probe}/x"], dict(os.environ))
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def test_a_read_only_home_fails_at_once_with_exit_2_naming_it(tmp_path: Path) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("needs a private read-only bind mount (unshare --mount as root)")
    home = tmp_path / "home"
    (home / "prefect").mkdir(parents=True)
    (home / "data").mkdir()
    start = time.monotonic()
    done = _ro_mount(home, [str(GREYLAB), "press", "detect", "--model", "M1"], _env(home))
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - start < 60  # was ~100 s of retries
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"GREYLAB_HOME {home}" in lines[0], done.stderr


def test_a_home_that_cannot_be_created_is_exit_2_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = subprocess.run(
        [str(GREYLAB), "press", "detect", "--model", "M1"], env=_env(blocker / "home"),
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert str(blocker) in done.stderr and "Traceback" not in done.stderr


def _store(path: Path) -> int:
    with sqlite3.connect(path) as db:
        db.execute("create table t (x text)")
        db.executemany("insert into t values (?)", [("y" * 500,)] * 200)
    return path.stat().st_size


def test_a_truncated_store_exits_1_naming_it_on_press_validate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    size = _store(home / "mlflow.db")
    os.truncate(home / "mlflow.db", size // 2)
    table = tmp_path / "val.csv"
    table.write_text("series,step\n")
    done = subprocess.run(
        [str(GREYLAB), "press", "validate", "--model", "models:/press-M1/1", "--data",
         str(table), "--json"],
        env=_env(home), capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"MLflow store {home / 'mlflow.db'} is truncated" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_damaged_store_files_are_named(tmp_path: Path) -> None:
    good = tmp_path / "good.db"
    size = _store(good)
    check_sqlite_file(good, "store")
    check_sqlite_file(tmp_path / "missing.db", "store")  # created on first use
    (tmp_path / "empty.db").write_bytes(b"")
    check_sqlite_file(tmp_path / "empty.db", "store", artifacts=tmp_path / "none")
    artifacts = tmp_path / "mlartifacts"
    (artifacts / "1").mkdir(parents=True)
    with pytest.raises(StoreError, match=r"empty\.db is empty"):
        check_sqlite_file(tmp_path / "empty.db", "store", artifacts=artifacts)
    (tmp_path / "text.db").write_text("x" * 200)
    with pytest.raises(StoreError, match=r"text\.db is not a SQLite database"):
        check_sqlite_file(tmp_path / "text.db", "store")
    os.truncate(good, size - 4096)
    with pytest.raises(StoreError, match=r"good\.db is truncated"):
        check_sqlite_file(good, "store")


def test_a_store_damaged_inside_exits_1_naming_it_on_press_validate(tmp_path: Path) -> None:
    """A store whose header is intact but whose pages are garbage fails inside MLflow
    (`products.files.StoreUnreadable`): exit 1 with the store named, no "internal error"."""
    home = tmp_path / "home"
    home.mkdir()
    _store(home / "mlflow.db")
    data = bytearray((home / "mlflow.db").read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)
    (home / "mlflow.db").write_bytes(bytes(data))
    table = tmp_path / "val.csv"
    table.write_text("series,step\n")
    done = subprocess.run(
        [str(GREYLAB), "press", "validate", "--model", "models:/press-M1/1", "--data",
         str(table), "--json"],
        env=_env(home), capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert str(home / "mlflow.db") in done.stderr and "internal error" not in done.stderr

"""The stores greylab creates on first use: created once under a file lock, checked, owned.

| store | created by | lock file |
|---|---|---|
| MLflow SQLite store (`$GREYLAB_HOME/mlflow.db`: tracking and model registry) | `prepare_tracking_store` (through `Tracker`) | `mlflow.db.lock` next to it |
| Prefect's SQLite database of a temporary server (`$PREFECT_HOME/prefect.db`) | `runtime.server_guard` before the server starts | `prefect.db.lock` next to it |
| result cache folder | `tasks.cache.ensure_cache_dir` (`mkdir` + marker written atomically) | - |

Creating or migrating a SQLite store is not safe when two processes do it at once (MLflow:
"duplicate column name: step", "Online migration expected to match one row"); so the first
use of a store in a process takes an exclusive `fcntl.flock` on the lock file, creates or
upgrades the store and releases it; later processes find the tables and migrate nothing.
The MLflow store is kept in SQLite's WAL mode on a local disk (`runtime.sqlite_journal`).

A damaged store (a truncated or overwritten `mlflow.db`) is an infrastructure failure:
`StoreError` names the file and what is wrong (the CLI: exit 1, no traceback). A GREYLAB_HOME
greylab cannot write is the user's setting: `check_home` raises `InputError` naming it
(exit 2) before any server starts (it used to cost ~100 s of retries).

Runs left RUNNING by a killed process: every run greylab starts carries its owner process
(`owner_tags`: host, boot id, pid and the process's start time); the first store use of a
later process on the same host (`reap_killed_runs`) marks RUNNING runs whose owner is gone
KILLED. Runs of other hosts are never touched.

Only the standard library is imported at module level (the CLI calls `check_home` and
`check_local_store` at startup).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from methods.errors import InputError
from runtime import store_templates
from runtime.settings import Settings
from runtime.sqlite_journal import header_problem, use_write_ahead_log

LOCK_TIMEOUT_S = 300.0
TAG_HOST = "greylab.host"
TAG_PROCESS = "greylab.process"


class StoreError(RuntimeError):
    """A store greylab uses is damaged or cannot be created: an infrastructure failure (exit
    1), with a message that names the store."""


@contextlib.contextmanager
def store_lock(store: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive `flock` on `<store>.lock` (created next to the store)."""
    lock = store.with_name(store.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{lock}: another process has held this lock for more than {timeout:g} s "
                        "while creating the store; if no greylab process is running, delete "
                        "the lock file"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def sqlite_path(uri: str) -> Path | None:
    """The file of a `sqlite:///…` URI (None for any other store or an in-memory one)."""
    if not uri.startswith("sqlite:"):
        return None
    path = uri.split("://", 1)[-1].removeprefix("/").split("?", 1)[0]
    return None if not path or path == ":memory:" else Path(path).resolve()


def check_sqlite_file(path: Path, what: str, *, artifacts: Path | None = None) -> None:
    """Raise `StoreError` when the SQLite file at `path` exists but is damaged: not a SQLite
    file, cut short (smaller than its header says), or empty while `artifacts` (the folder
    of what the store recorded) holds entries. Reads the 100-byte header only."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{what} {path} cannot be read ({exc.strerror})") from None
    fix = "restore it from a backup, or move it away (greylab then creates a new, empty store)"
    if size == 0:
        if artifacts is not None and _has_entries(artifacts):
            raise StoreError(
                f"{what} {path} is empty (0 bytes) although {artifacts} holds recorded "
                f"artifacts: the store was truncated; {fix}"
            )
        return
    problem = header_problem(header, size)
    if problem == "not a SQLite database":
        raise StoreError(f"{what} {path} is not a SQLite database ({size} bytes); {fix}")
    if problem:
        raise StoreError(f"{what} {path} is {problem}; {fix}")


def _has_entries(folder: Path) -> bool:
    try:
        return any(True for _ in folder.iterdir())
    except OSError:
        return False


def check_home(settings: Settings) -> None:
    """`InputError` (exit 2) naming GREYLAB_HOME when greylab cannot write there (a read-only
    mount, another user's folder): at once, instead of a server that never starts."""
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".greylab-probe-", dir=home)
        os.close(fd)
        os.unlink(probe)
        problem = ""
        prefect = Path(os.environ.get("PREFECT_HOME") or home / "prefect")
        for target in (home / "mlflow.db", prefect, prefect / "prefect.db"):
            if target.exists() and not os.access(target, os.W_OK):
                problem = f"{target} is not writable"
                break
    except OSError as exc:
        problem = f"cannot write there ({exc.strerror or exc})"
    if problem:
        raise InputError(
            f"GREYLAB_HOME {str(home)[:300]}: {problem}; greylab keeps its MLflow store, Prefect "
            "database, cache and data there: make it writable for this user or set "
            "GREYLAB_HOME to a folder you can write"
        )


def check_local_store(settings: Settings) -> None:
    """The local MLflow store, when there is one, is not damaged (`StoreError` otherwise)."""
    path = sqlite_path(settings.tracking_uri)
    if path is not None:
        check_sqlite_file(path, "MLflow store", artifacts=settings.home / "mlartifacts")


_REAPED: set[str] = set()


def tracking_client(settings: Settings) -> Any:
    """An `MlflowClient` of `settings`' store. MLflow creates or upgrades a store when a client
    first opens it: for a local SQLite store that happens here under the store's lock (and
    the file is checked first), so concurrent first runs never migrate it twice."""
    from mlflow import MlflowClient

    uri = settings.tracking_uri
    path = sqlite_path(uri)
    if path is None:
        return MlflowClient(tracking_uri=uri)
    with contextlib.ExitStack() as stack:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(store_lock(path))
        except OSError as exc:
            raise InputError(
                f"MLflow store {path}: cannot create it or its lock file ({exc.strerror}); "
                "make the folder writable or set GREYLAB_HOME / MLFLOW_TRACKING_URI"
            ) from None
        check_sqlite_file(path, "MLflow store", artifacts=settings.home / "mlartifacts")
        new = store_templates.is_new(path)
        seeded = new and store_templates.seed(path, "mlflow")  # the migrated template
        if seeded:
            _default_experiment_here(path)
        client = _opened(lambda: MlflowClient(tracking_uri=uri), f"MLflow store {path}")
        if new and not seeded:  # created just now, empty: the template for the next home
            store_templates.save(path, "mlflow")
        use_write_ahead_log(path)  # a commit a call: 2-3x faster (runtime.sqlite_journal)
        return client


def _default_experiment_here(path: Path) -> None:
    """MLflow's `Default` experiment of a store copied from a template, as MLflow creates it
    in this process: artifacts under `./mlruns/0` of the working folder, created now."""
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.utils.uri import append_to_uri_path, resolve_uri_if_local

    location = append_to_uri_path(resolve_uri_if_local(DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH), "0")
    now = int(time.time() * 1000)
    con = sqlite3.connect(path, timeout=30.0)
    try:
        with con:
            con.execute(
                "UPDATE experiments SET artifact_location = ?, creation_time = ?, "
                "last_update_time = ? WHERE experiment_id = 0", (location, now, now),
            )  # fmt: skip
    finally:
        con.close()


def _opened(make: Any, name: str) -> Any:
    """`make()` a client and open its registry store too (MLflow creates it on first use)."""
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import DatabaseError

    try:
        client = make()
        client.search_registered_models(max_results=1)
    except DatabaseError as exc:
        raise StoreError(f"{name} cannot be opened: {str(exc.orig)[:300]}") from None
    except MlflowException as exc:
        if "database" not in str(exc).lower():
            raise
        raise StoreError(f"{name} cannot be opened: {str(exc)[:300]}") from None
    return client


def prepare_tracking_store(client: Any, settings: Settings) -> None:
    """Once per process and store, before the first run: the store exists (`client` opened
    it, `tracking_client`) and runs of killed processes on this host are marked KILLED."""
    if settings.tracking_uri not in _REAPED:
        _REAPED.add(settings.tracking_uri)
        client.search_experiments(max_results=1)
        reap_killed_runs(client)


# -- runs of processes that are gone ------------------------------------------------------


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:36]
    except OSError:
        return "-"


def _start_ticks(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks after boot), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def process_id(pid: int | None = None) -> str:
    """`boot id/pid/start ticks` of a process (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{_boot_id()}/{pid}/{_start_ticks(pid) or '-'}"


def owner_tags() -> dict[str, str]:
    """Tags naming the process that owns a run (set when the run starts)."""
    return {TAG_HOST: socket.gethostname()[:200], TAG_PROCESS: process_id()}


def owner_gone(process: str) -> bool:
    """The owner `boot id/pid/start ticks` (this host) no longer runs."""
    try:
        boot, pid, ticks = process.split("/")
        number = int(pid)
    except ValueError:
        return False  # not ours to judge
    if boot != _boot_id():
        return True  # the machine restarted since
    return _start_ticks(number) != ticks


def reap_killed_runs(client: Any) -> list[str]:
    """Mark RUNNING runs of this host whose owner process is gone KILLED; returns their ids.
    A store that cannot be searched is left as it is (this is housekeeping)."""
    from mlflow.entities import ViewType

    host = socket.gethostname()[:200].replace("'", "")
    killed: list[str] = []
    try:
        ids = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
        query = f"attributes.status = 'RUNNING' and tags.`{TAG_HOST}` = '{host}'"
        for start in range(0, len(ids), 100):
            for run in client.search_runs(ids[start : start + 100], query, max_results=1000):
                if owner_gone(run.data.tags.get(TAG_PROCESS, "")):
                    client.set_terminated(run.info.run_id, status="KILLED")
                    client.set_tag(
                        run.info.run_id,
                        "greylab.killed",
                        "owner process gone; marked KILLED "
                        f"by process {process_id()} on a later start",
                    )
                    killed.append(run.info.run_id)
    except Exception:  # never fail a run over housekeeping
        return killed
    return killed

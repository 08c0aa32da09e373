"""Run a temporary Prefect server (uvicorn) that dies with the process that started it.

    python -m runtime.server_guard PARENT_PID -- <uvicorn arguments>

Started by `guard_temporary_servers` (below) in place of `python -m uvicorn`. Two
mechanisms, because a SIGKILLed parent runs no cleanup:

- the Linux parent-death signal (`prctl(PR_SET_PDEATHSIG, SIGTERM)`), set here, in the
  server's own process: the kernel signals it when the parent thread dies;
- a daemon thread that checks every 0.5 s whether the parent pid is still our parent (the
  parent-death signal follows the *thread* that forked, and a parent that died before the
  prctl call would be missed) and otherwise ends this process.

The server never imports from the folder the CLI runs in: it starts as `python -P` (no working
folder on `sys.path`) with a `PYTHONPATH` from which the working folder is removed
(`neutral_environment`); the CLI sets `PYTHONSAFEPATH=1` for every Python child process
(`isolate_child_processes`), e.g. the spawned Dask workers of `--runner dask`.

Prefect's SQLite database (`$PREFECT_HOME/prefect.db`) is created or upgraded here, before
uvicorn starts, under `runtime.stores.store_lock` (two first runs at once would otherwise migrate
it twice); the server is then told not to migrate again.

Only the standard library is used before uvicorn runs (apart from that one-time migration,
which imports what the server imports anyway).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from runtime.local_server import neutral_environment

PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: int = signal.SIGTERM) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _watch(parent: int, period: float = 0.5) -> None:
    while True:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down on SIGTERM
            time.sleep(5)
            os._exit(1)  # still here: leave at once
        time.sleep(period)


_TARGET = "prefect.server.api.server"


class _GuardOnImport:
    """Meta-path finder: when `prefect.server.api.server` is imported, guard its servers
    (`guard_temporary_servers`) - without importing Prefect eagerly."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name != _TARGET:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        if spec is None or spec.loader is None:
            return None
        loader: Any = spec.loader
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            guard_temporary_servers()

        loader.exec_module = exec_module
        return spec


def install_import_hook() -> None:
    """Guard Prefect's temporary servers of this process whenever Prefect's server module is
    imported (the CLI calls this first; idempotent)."""
    if _TARGET in sys.modules:
        guard_temporary_servers()
    elif not any(isinstance(f, _GuardOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())  # type: ignore[arg-type]


def isolate_child_processes() -> None:
    """Every Python process started from this one (and its children) runs without the
    working folder first on `sys.path` (Python 3.11's `PYTHONSAFEPATH`)."""
    os.environ["PYTHONSAFEPATH"] = "1"


def _prefect_sqlite() -> Path | None:
    """The file of Prefect's SQLite database, or None (another database, or in memory)."""
    for name in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        if os.environ.get(name, "sqlite").split(":", 1)[0].split("+", 1)[0] != "sqlite":
            return None
    os.environ["PREFECT_API_DATABASE_MIGRATE_ON_START"] = "false"  # read once, at import
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    text = url.get_secret_value() if url is not None else ""
    path = text.split("://", 1)[-1].removeprefix("/").split("?", 1)[0]
    return None if not path or ":memory:" in path else Path(path)


def migrate_prefect_database() -> None:
    """Create or upgrade Prefect's SQLite database under its lock (`prefect.db.lock`); a new
    one is copied from the template of this Prefect version (`runtime.store_templates`)."""
    import asyncio

    path = _prefect_sqlite()
    if path is None:
        return
    from runtime import store_templates
    from runtime.stores import store_lock

    path.parent.mkdir(parents=True, exist_ok=True)
    with store_lock(path):
        new = store_templates.is_new(path)
        if new and store_templates.seed(path, "prefect"):  # migrated by this Prefect version
            return
        from prefect.server.database import provide_database_interface

        asyncio.run(provide_database_interface().create_db())
        if new:  # created just now, empty: the template for the next home
            store_templates.save(path, "prefect")


def _leave_working_folder() -> None:
    """Run in Prefect's home (or `/`), not in the folder the CLI was started from: Prefect's
    migrations put "." on `sys.path` (its `alembic.ini`: `prepend_sys_path = .`)."""
    home = os.environ.get("PREFECT_HOME")
    if home:
        home = os.environ["PREFECT_HOME"] = str(Path(home).expanduser().resolve())
        with contextlib.suppress(OSError):
            Path(home).mkdir(parents=True, exist_ok=True)
    for folder in (home, "/"):
        with contextlib.suppress(OSError, TypeError):
            os.chdir(folder)  # type: ignore[arg-type]
            return


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] != "--":
        sys.exit("usage: python -m runtime.server_guard PARENT_PID|detached:IDLE -- <uvicorn args>")
    if argv[0].startswith("detached:"):  # the shared server (runtime.local_server)
        # watched once the app exists (`idle_app`, imported by uvicorn as another module
        # than this `__main__`: hence the environment)
        os.environ[_IDLE_WATCH] = str(float(argv[0].split(":", 1)[1]))
    else:
        parent = int(argv[0])
        _parent_death_signal()
        if os.getppid() != parent:  # the parent died before the signal was armed
            sys.exit(1)
        threading.Thread(target=_watch, args=(parent,), daemon=True, name="parent-watch").start()
    _leave_working_folder()
    before = list(sys.path)
    migrate_prefect_database()
    sys.path[:] = [entry for entry in sys.path if entry in before]  # alembic prepends "."
    sys.argv = ["uvicorn", *argv[2:]]
    runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)


#: the shared server's traffic: open HTTP requests and websockets, and the last time one ended
_IDLE_WATCH = "GREYLAB_SERVER_IDLE_WATCH"
_activity: dict[str, float] = {"open": 0, "last": time.monotonic()}


def idle_app() -> Any:
    """Prefect's app (uvicorn factory), counting requests and connections for `_idle_watch`."""
    from prefect.server.api.server import create_app

    app = create_app()
    _activity["last"] = time.monotonic()  # idle from here: not during the migration
    idle = os.environ.pop(_IDLE_WATCH, None)
    if idle is not None:
        watch = threading.Thread(target=_idle_watch, args=(float(idle),), daemon=True, name="idle")
        watch.start()

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await app(scope, receive, send)

        async def heard() -> Any:  # every message in or out is activity
            _activity["last"] = time.monotonic()
            return await receive()

        async def said(message: Any) -> None:
            _activity["last"] = time.monotonic()
            await send(message)

        _activity["open"] += 1
        try:
            await app(scope, heard, said)
        finally:
            _activity["open"] -= 1
            _activity["last"] = time.monotonic()

    return counted


#: silence after which the shared server stops even with connections open (a client that was
#: stopped or hangs while holding its events websocket)
SILENT_MAX_S = 3600.0


def should_stop(open_connections: float, silent_s: float, idle: float) -> bool:
    """Stop after `idle` seconds without a message and without an open request or connection,
    or after `max(idle, SILENT_MAX_S)` seconds without any message at all."""
    return silent_s > max(idle, SILENT_MAX_S) or (open_connections <= 0 and silent_s > idle)


def _idle_watch(idle: float) -> None:
    """End this server when `should_stop` says so."""
    while True:
        time.sleep(min(1.0, max(idle / 4, 0.05)))
        if should_stop(_activity["open"], time.monotonic() - _activity["last"], idle):
            os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down on SIGTERM
            time.sleep(10)
            os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])


class _GuardedSubprocess:
    """`subprocess` as seen by `prefect.server.api.server`: `Popen` of the uvicorn server runs
    it through `runtime.server_guard <parent pid>` instead of `-m uvicorn` directly."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def Popen(self, args: Any, *rest: Any, **kwargs: Any) -> Any:
        args = list(args)
        if args[1:3] == ["-m", "uvicorn"]:
            # -P: the server never imports from the folder the CLI runs in (issue 28)
            args[1:3] = ["-P", "-m", "runtime.server_guard", str(os.getpid()), "--"]
            kwargs["env"] = neutral_environment(kwargs.get("env"))
        return self._real.Popen(args, *rest, **kwargs)


def guard_temporary_servers() -> None:
    """Make every temporary Prefect server of this process die with it (idempotent)."""
    import subprocess

    from prefect.server.api import server as prefect_server

    if not isinstance(prefect_server.subprocess, _GuardedSubprocess):
        prefect_server.subprocess = _GuardedSubprocess(subprocess)  # type: ignore[assignment]

"""Test-session environment: the same quiet Prefect console as the command line, set before
Prefect is imported (it reads its settings at import). Prefect's ephemeral server logs its
shutdown from an exit hook, after pytest has closed the captured streams.

One Prefect server per test process (each pytest-xdist worker, or the one pytest process),
started once for the run (issue 31): launched in `pytest_configure`, before any test module
imports Prefect, waited for (bounded) before the first test, stopped by its process group in
`pytest_unconfigure` and dying with the worker even on SIGKILL. Its URL is `PREFECT_API_URL`
for the in-process flows and for every command a test starts, as a configured server is for
a user. Tests of the server's own start, reuse and stop, and of a command's exit with its
temporary server, remove `PREFECT_API_URL` from their commands' environment (the fixture
`own_prefect_server`, or an environment built without it). `GREYLAB_TEST_PREFECT=own`
runs the whole suite without the shared server (every command starts its own)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# Tests build study settings as the trusted Python API does, with files anywhere (tmp_path);
# the confinement of dashboard data paths (flows/data_refs.py) is tested on its own, with this
# unset (tests/hostile/test_dashboard_data.py).
os.environ.setdefault("GREYLAB_ALLOWED_DATA_ROOTS", os.sep)
# No command of the suite starts the product's shared local server (runtime/local_server.py):
# it would outlive every temporary GREYLAB_HOME for its idle time; its own tests set the
# variable themselves. Commands use the test process's server (PREFECT_API_URL, below), or,
# without it, a temporary server each that ends with them.
os.environ.setdefault("GREYLAB_SERVER_IDLE", "0")
# Commands run in-process, not in the warm fork server (runtime/warm.py): a daemon per
# temporary GREYLAB_HOME would outlive the test by its idle time; its own tests
# (tests/flows/test_warm_cli.py) enable it and stop what they start.
os.environ.setdefault("GREYLAB_WARM", "0")

ROOT = Path(__file__).resolve().parents[1]
#: `GREYLAB_TEST_PREFECT=own`: no shared test server, every command and test process starts
#: its own temporary Prefect server as before (the product's default path for the whole run)
SHARED_ENV = "GREYLAB_TEST_PREFECT"
#: the URL of this test process's shared Prefect server, for tests that build a child's
#: environment from scratch; `PREFECT_API_URL` holds the same
URL_ENV = "GREYLAB_TEST_PREFECT_API_URL"
#: bounded wait for the shared server's first answer (its database comes from the template)
START_TIMEOUT_S = 120.0
#: the shared server of this process: pid, port, home, Popen (empty when none)
_SERVER: dict[str, Any] = {}


#: markers of the long tests (`make test-fast` leaves them out)
_LONG = ("slow", "integration", "browser")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """The modules holding long tests run first, each module's tests together and in their
    order (a module-scoped fixture is set up once per worker). pytest-xdist hands tests out in
    this order, so at the end both workers run short tests and finish together instead of one
    waiting for the other's last 2-minute search (the longest-first rule)."""
    long_modules = {
        item.nodeid.split("::")[0] for item in items
        if any(item.get_closest_marker(name) for name in _LONG)
    }  # fmt: skip
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in long_modules)


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _launch_prefect_server() -> None:
    """Launch this test process's Prefect server without waiting for it (it starts while the
    tests are collected): the product's own server (`runtime.server_guard`, uvicorn with
    Prefect's app, no UI) on 127.0.0.1 and a free port, with a Prefect home of its own, in its
    own process group, dying with this process even on SIGKILL (the guard's parent-death
    signal and parent watch). Its URL is exported as `PREFECT_API_URL` before Prefect is
    imported, so the in-process flows and every command a test starts use it as a configured
    server (issue 31: a CLI call started its own temporary server, 3-10 CPU s each)."""
    from runtime.local_server import neutral_environment

    home = Path(tempfile.mkdtemp(prefix="greylab-test-prefect-"))
    port = _free_port()
    env = neutral_environment()
    env.update(PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT_HOME=str(home))
    env.pop("PREFECT_API_URL", None)
    uvicorn = ["--app-dir", str(ROOT), "--factory", "runtime.server_guard:idle_app", "--host",
               "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"]  # fmt: skip
    with open(home / "server.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "runtime.server_guard", str(os.getpid()), "--",
             *uvicorn],
            cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    _SERVER.update(pid=process.pid, port=port, home=home, process=process)
    url = f"http://127.0.0.1:{port}/api"
    os.environ["PREFECT_API_URL"] = os.environ[URL_ENV] = url  # a developer's server untouched


def _stop_prefect_server() -> None:
    """SIGTERM to the shared server's process group, SIGKILL after 10 s; its home removed."""
    process = _SERVER.get("process")
    if process is None:
        return
    if "prefect.logging.handlers" in sys.modules:  # this process's queued logs and events
        from prefect.events.worker import EventsWorker  # sent first: at exit they would meet
        from prefect.logging.handlers import APILogWorker  # a stopped server ("Error logging")

        for service in (APILogWorker, EventsWorker):
            with contextlib.suppress(Exception):
                service.drain_all(timeout=10.0, at_exit=False)
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
            break
    shutil.rmtree(_SERVER["home"], ignore_errors=True)
    _SERVER.clear()


def _wait_prefect_server() -> None:
    """Wait (at most `START_TIMEOUT_S`) until the shared server answers `/api/health`."""
    process = _SERVER["process"]
    url = f"http://127.0.0.1:{_SERVER['port']}/api/health"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url, timeout=2.0) as answer:
                if answer.status == 200:
                    _SERVER["ready"] = True
                    return
        time.sleep(0.1)
    log = (_SERVER["home"] / "server.log").read_text(errors="replace")[-3000:]
    pytest.exit(f"the tests' Prefect server ({url}) did not answer within "
                f"{START_TIMEOUT_S:g} s (exit code {process.poll()}):\n{log}", returncode=3)  # fmt: skip


@pytest.fixture(scope="session", autouse=True)
def _shared_prefect_server() -> None:
    """The test process's shared Prefect server answers before its first test runs."""
    if _SERVER and not _SERVER.get("ready"):
        _wait_prefect_server()


@pytest.fixture
def own_prefect_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's commands start their own temporary Prefect server (no `PREFECT_API_URL`
    in the environment they inherit), as for a user without a configured server: for tests of
    the server's own start, reuse, stop and exit behaviour. In-process flows keep the shared
    server (Prefect read its settings at import)."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv(URL_ENV, raising=False)


def pytest_unconfigure(config: Any) -> None:
    _stop_prefect_server()


def pytest_configure(config: Any) -> None:
    """pytest-xdist's load scheduling hands each worker a first chunk of a quarter of its share
    and more only as it runs dry: with the long modules first, the first worker got 186
    consecutive tests holding most of the long ones and nothing after them (a full run of
    1490 tests, 2026-12-06 03:16-03:48 UTC: its tests 1862 s, the other worker's 1304 tests
    1549 s, then idle). One test at a time (`--maxschedchunk 1`, unless given) lets the free
    worker take the next long test: longest first on both workers (that run's durations
    replayed through xdist's rules: both end at 1706 s instead of 1862 and 1549)."""
    if getattr(config.option, "maxschedchunk", False) is None:
        config.option.maxschedchunk = 1
    distributing = getattr(config.option, "dist", "no") != "no" and getattr(
        config.option, "tx", None
    )
    controller = distributing and not hasattr(config, "workerinput")  # xdist: runs no test
    collecting = config.option.collectonly or config.option.help
    if os.environ.get(SHARED_ENV, "shared") == "own":
        os.environ.pop("PREFECT_API_URL", None)  # never a developer's server: each its own
    elif not controller and not collecting:
        _launch_prefect_server()  # before any test module imports Prefect


#: where a command run in-process keeps the plugin references it allowed for the rest of the
#: process (`--models mod:attr`, `--system mod:attr`), and their environment variables
_ALLOWANCES = {"models.registry": "GREYLAB_ALLOWED_MODELS",
               "models.underactuated.plugins": "GREYLAB_ALLOWED_SYSTEMS"}  # fmt: skip


@pytest.fixture(autouse=True)
def _plugin_allowances_end_with_the_test() -> Iterator[None]:
    """A plugin one test allowed is not allowed in the next test of the same worker (a form
    test listing the allowed models saw `springmod:spring` of a press cache test run before
    it): the session sets and variables as they were before the test."""
    sets = {
        name: set(getattr(sys.modules.get(name), "_SESSION_ALLOWED", ())) for name in _ALLOWANCES
    }
    env = {var: os.environ.get(var) for var in _ALLOWANCES.values()}
    yield
    for name, kept in sets.items():
        session = getattr(sys.modules.get(name), "_SESSION_ALLOWED", None)
        if isinstance(session, set):
            session.clear()
            session.update(kept)
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value

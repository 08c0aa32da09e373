"""Task runners for the study flows: threads in-process, or a Dask cluster.

`RunnerKind.dask` uses `GREYLAB_DASK_ADDRESS` when set (an existing scheduler, e.g. the compose
stack's), otherwise a local cluster of worker processes started for the flow run and stopped
after it. Dask workers need no Prefect settings; they import this project, so it must be
installed where they run.

The CLI shares one local Prefect server between its calls (`runtime.local_server`: started on
demand, detached, stopping itself after `GREYLAB_SERVER_IDLE` seconds idle; `shared_api`).
Temporary Prefect servers (with `GREYLAB_SERVER_IDLE=0` and for in-process callers: Prefect's ephemeral server and the one `api_for_workers` starts for
Dask workers) die with the process that started them, even on SIGKILL: `guard_temporary_servers`
makes their subprocess run through `runtime.server_guard`, which sets the Linux parent-death
signal and also watches the parent's pid (the parent-death signal alone follows the *thread*
that started the server). The server runs with `python -P` and without the working folder in
its `PYTHONPATH` (`runtime.server_guard.neutral_environment`), so a `uvicorn.py` or `json.py`
next to the user's tables is never imported; local Dask workers are spawned by
`multiprocessing` with the parent's `sys.path` (the console script's: no working folder) and
`PYTHONSAFEPATH=1` (set by the CLI, `runtime.server_guard.isolate_child_processes`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from methods.errors import InputError
from models import limits
from runtime.server_guard import guard_temporary_servers
from runtime.settings import load_settings


class RunnerKind(StrEnum):
    thread = "thread"
    dask = "dask"


def runner_kind(kind: RunnerKind | str) -> RunnerKind:
    """`kind` as a `RunnerKind`; an unknown name is an `InputError` (exit 2)."""
    try:
        return RunnerKind(kind)
    except ValueError:
        choices = ", ".join(k.value for k in RunnerKind)
        raise InputError(f"--runner must be one of {choices}, got {str(kind)[:80]!r}") from None


def make_task_runner(kind: RunnerKind | str, *, workers: int = 2) -> Any:
    kind = runner_kind(kind)
    if kind is RunnerKind.thread:
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=max(1, workers))
    from prefect_dask import DaskTaskRunner

    address = load_settings().dask_address
    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": max(1, workers),
            "threads_per_worker": 1,
            "processes": True,
            "host": "127.0.0.1",
            "dashboard_address": None,
        },
    )


@contextlib.contextmanager
def api_for_workers(kind: RunnerKind | str) -> Iterator[None]:
    """Give Dask worker processes the flow's Prefect API.

    Workers report their task runs to the API named by their own `PREFECT_API_URL`. With none
    configured (ephemeral mode) every worker process would start a temporary server of its
    own; so start one here, export its URL (local workers are spawned after this and inherit
    it), and stop it afterwards. With a configured server, nothing to do.
    """
    if runner_kind(kind) is not RunnerKind.dask or os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    guard_temporary_servers()
    server = SubprocessASGIServer()
    server.start(timeout=120)
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()


def _drain_reporting(timeout: float = 10.0) -> None:
    """Send Prefect's queued logs and events now. Left for interpreter exit, they would meet a
    stopped temporary server: "Error logging to API - All connection attempts failed" and a
    wait at exit while the clients retry."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        service.drain_all(timeout=timeout, at_exit=False)


@contextlib.contextmanager
def safe_child_path() -> Iterator[None]:
    """`PYTHONSAFEPATH=1` while a flow runs: the Python processes it starts (spawned Dask
    workers, their `-c` bootstrap) never put the working folder first on `sys.path`."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before


#: set by the CLI (`flows.cli.main` of the command's own process): flows use the shared local
#: Prefect server (`runtime.local_server`); in-process callers keep a temporary one
SHARE_SERVER = False


def _shares_server() -> bool:
    """The CLI asked for the shared local server, `PREFECT_API_URL` is unset and
    `GREYLAB_SERVER_IDLE` is not 0."""
    from runtime import local_server

    return (
        SHARE_SERVER and not os.environ.get("PREFECT_API_URL") and bool(local_server.idle_seconds())
    )


def prestart_shared_server() -> None:
    """Launch the shared local server now, without waiting, when a flow will use it: the CLI
    calls this at its start for a command that runs a flow (`flows.cli.FLOW_COMMANDS`), so
    the server starts while the command tree and the flow load
    (`runtime.local_server.prestart`)."""
    if _shares_server():
        from runtime import local_server

        local_server.prestart()


@contextlib.contextmanager
def shared_api() -> Iterator[None]:
    """Point Prefect at the shared local server (started if needed, or waited for when
    `prestart_shared_server` launched it) when `_shares_server`; otherwise do nothing (and
    the temporary servers started later are guarded)."""
    from runtime import local_server

    if not _shares_server():
        guard_temporary_servers()
        yield
        return
    url = local_server.ensure_server()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield
    finally:
        os.environ.pop("PREFECT_API_URL", None)


@contextlib.contextmanager
def heartbeats_if_asked() -> Iterator[None]:
    """Flow runs started here send no heartbeats unless Prefect's heartbeat frequency was set
    (environment, profile or `prefect.toml`). Prefect's heartbeats only serve an automation
    that marks runs without them as crashed, which greylab does not define; with them on,
    every flow run waits at its end for the heartbeat thread's one-second sleep (0.2-0.3 s
    measured per `press detect`, up to 1 s; issue 31). Deployed runs keep Prefect's setting."""
    from prefect.settings import (
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        get_current_settings,
        temporary_settings,
    )

    if "heartbeat_frequency" in get_current_settings().flows.model_fields_set:
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def run_flow(flow: Any, study: Any, *, runner: RunnerKind | str, workers: int) -> Any:
    """Run a study flow on the chosen task runner (threads, or a Dask cluster). Its logs and
    events are sent before this returns, while the server (a temporary one for Dask workers)
    still runs: the command ends when its work ends. No heartbeats unless asked for
    (`heartbeats_if_asked`)."""
    runner = runner_kind(runner)
    limits.check("workers", workers, "GREYLAB_MAX_WORKERS")
    with safe_child_path(), shared_api(), api_for_workers(runner), heartbeats_if_asked():
        try:
            return flow.with_options(task_runner=make_task_runner(runner, workers=workers))(study)
        finally:
            _drain_reporting()

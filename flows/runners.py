"""Task runners for the study flows: threads in-process, or a Dask cluster.

`RunnerKind.dask` uses `GREYLAB_DASK_ADDRESS` when set (an existing scheduler, e.g. the compose
stack's), otherwise a local cluster of worker processes started for the flow run and stopped
after it. Dask workers need no Prefect settings; they import this project, so it must be
installed where they run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from tasks.settings import load_settings


class RunnerKind(StrEnum):
    thread = "thread"
    dask = "dask"


def make_task_runner(kind: RunnerKind | str, *, workers: int = 2) -> Any:
    kind = RunnerKind(kind)
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
    if RunnerKind(kind) is not RunnerKind.dask or os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = SubprocessASGIServer()
    server.start(timeout=120)
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield
    finally:
        os.environ.pop("PREFECT_API_URL", None)
        server.stop()


def run_flow(flow: Any, study: Any, *, runner: RunnerKind | str, workers: int) -> Any:
    """Run a study flow on the chosen task runner (threads, or a Dask cluster)."""
    with api_for_workers(runner):
        return flow.with_options(task_runner=make_task_runner(runner, workers=workers))(study)

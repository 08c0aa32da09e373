"""Task runners for the study flows: threads in-process, or a Dask cluster.

`RunnerKind.dask` uses `GREYLAB_DASK_ADDRESS` when set (an existing scheduler, e.g. the compose
stack's), otherwise a local cluster of worker processes started for the flow run and stopped
after it. Dask workers need no Prefect settings; they import this project, so it must be
installed where they run.
"""

from __future__ import annotations

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

"""Parallel logging to a real MLflow server: no lost metrics, no "database is locked"."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from tests.integration.services import mlflow_server

pytestmark = pytest.mark.integration

N_WRITERS = 6
N_VALUES = 400


def _writer(uri: str, index: int, parent: str) -> str:
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    tracker = Tracker(load_settings({"MLFLOW_TRACKING_URI": uri, "GREYLAB_HOME": "/tmp"}))
    run = tracker.start_run("parallel", f"writer-{index}", study="press", parent_run_id=parent)
    tracker.log_params(run, {"writer": index, "n": N_VALUES})
    tracker.log_series(run, "alpha_min", [i / N_VALUES for i in range(N_VALUES)])
    for step in range(20):  # many small requests at once as well as large batches
        tracker.log_metrics(run, {"loss": float(step), "index": float(index)}, step=step)
    tracker.end_run(run)
    return run


def test_parallel_writers_lose_nothing(tmp_path: Path) -> None:
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    with mlflow_server(tmp_path) as uri:
        tracker = Tracker(load_settings({"MLFLOW_TRACKING_URI": uri, "GREYLAB_HOME": "/tmp"}))
        tracker.ensure_store()
        parent = tracker.start_run("parallel", "parent", study="press")
        with mp.get_context("spawn").Pool(N_WRITERS) as pool:
            runs = pool.starmap(_writer, [(uri, i, parent) for i in range(N_WRITERS)])
        tracker.end_run(parent)

        client = tracker.client
        assert len(set(runs)) == N_WRITERS
        for index, run_id in enumerate(runs):
            history = client.get_metric_history(run_id, "alpha_min")
            assert sorted(m.step for m in history) == list(range(N_VALUES))
            assert len(client.get_metric_history(run_id, "loss")) == 20
            run = client.get_run(run_id)
            assert run.data.params["writer"] == str(index)
            assert run.data.tags["mlflow.parentRunId"] == parent
            assert run.info.status == "FINISHED"

"""The `model-validation` deployment for real (issue 27): served by `greylab serve` against a
real Prefect server and run through its API with the parameters the UI's form sends (what
"Run -> Custom run" does): a registered model validated, the run named after its outcome, the
summary artifact on its page; a hostile submission fails once with the message, nothing read.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.flows.test_validation_flow import store  # noqa: F401  (the registered models)
from tests.integration.services import prefect_server, stop, with_parent

pytestmark = pytest.mark.integration

DEPLOYMENT = "model-validation/model-validation"


def _client_call(call: Any) -> Any:
    from prefect.client.orchestration import get_client

    async def run() -> Any:
        async with get_client() as client:
            return await call(client)

    return asyncio.run(run())


def _wait_for_deployment(served: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:  # bounded wait until the served deployment is registered
        try:
            _client_call(lambda c: c.read_deployment_by_name(DEPLOYMENT))
            return
        except Exception:
            if time.monotonic() > deadline or served.poll() is not None:
                pytest.fail(f"deployment never appeared:\n{log.read_text()[-3000:]}")
            time.sleep(2)


def _run(parameters: dict[str, Any]) -> Any:
    from prefect.deployments import run_deployment

    return run_deployment(DEPLOYMENT, parameters=parameters, timeout=300)


def test_the_deployment_validates_a_registered_model_and_refuses_hostile_input(
    store: dict[str, Any],  # noqa: F811  (the imported fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        FlowRunFilter,
        FlowRunFilterId,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    data = str(store["root"] / "new.csv")
    with prefect_server(tmp_path) as api:
        # the worker as an operator runs it: data only from its data root (the store's folder)
        env = {**os.environ, **store["env"], "PREFECT_API_URL": api,
               "GREYLAB_DATA_ROOT": str(store["root"])}  # fmt: skip
        env.pop("GREYLAB_ALLOWED_DATA_ROOTS", None)  # the test session's allow-everything
        log = tmp_path / "serve.log"
        with log.open("wb") as sink:
            served = subprocess.Popen(
                with_parent([sys.executable, "-m", "flows.cli", "serve", "--only",
                             "model-validation"]),
                stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        monkeypatch.setenv("PREFECT_API_URL", api)
        try:
            with temporary_settings(updates={PREFECT_API_URL: api}):
                _wait_for_deployment(served, log)
                # a script's call with the two settings that have no default (the rest:
                # the flow's defaults, kind press and version champion)
                from deployments.runs import run_deployment

                partial = run_deployment(
                    DEPLOYMENT, {"settings": {"model": "press-M3", "data": data}}, timeout=300
                )
                # the form's submission: every field
                good = _run({"settings": {"kind": "press", "model": "press-M3",
                                          "version": "champion", "data": data,
                                          "experiment": "ui-validation"}})  # fmt: skip
                hostile = _run({"settings": {"kind": "press", "model": "press-M3",
                                             "version": "1", "data": "/etc/passwd",
                                             "experiment": "ui-validation"}})  # fmt: skip
                artifacts = _client_call(lambda c: c.read_artifacts(artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[good.id]))))  # fmt: skip
                task_runs = _client_call(lambda c: c.read_task_runs(flow_run_filter=FlowRunFilter(
                    id=FlowRunFilterId(any_=[hostile.id]))))  # fmt: skip
        finally:
            stop(served)
    assert good.state.is_completed(), log.read_text()[-3000:]
    assert good.name.startswith("validation: press-M3 v1 (champion): R^2 ")
    assert good.state.message == good.name  # the headline
    assert partial.state.is_completed() and partial.name == good.name  # same model, same data
    summary = {a.key: a for a in artifacts}["validation-summary"].data
    assert summary.startswith("# validation: press-M3 v1 \\(champion\\)")
    assert "| D\\_vertical |" in summary

    from mlflow import MlflowClient

    client = MlflowClient(store["env"]["MLFLOW_TRACKING_URI"])
    (run,) = client.search_runs(
        [client.get_experiment_by_name("ui-validation").experiment_id],
        filter_string=f"tags.`prefect.flow_run_id` = '{good.id}'",
    )
    assert run.info.run_name == good.name and run.data.tags["greylab.study"] == "validation"
    assert client.get_model_version("press-M3", "1").tags["validation.run_id"] == run.info.run_id

    # /etc/passwd is outside the worker's data root: the settings refuse it before any task
    assert hostile.state.is_failed()
    assert "outside the folders this worker reads data from" in hostile.state.message, (
        hostile.state.message
    )
    assert task_runs == []

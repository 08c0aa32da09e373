"""What a flow run records in MLflow is what it used, and its answer is in Prefect: the
outcome in the run names, the state message and a persisted result; the Prefect run and the
MLflow runs point at each other; the experiment opens as a model-development experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.settings import load_settings
from tracking.mlflow_tracker import EXPERIMENT_KIND, Tracker


def test_press_records_the_tests_it_ran_not_the_tests_asked_for(
    private_prefect: None, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client

    from flows.press.flow import PressStudy, press_uncertainty
    from flows.runners import run_flow

    # 6 series split 3 + 3: C(6, 3) = 20 distinct series splits, 30 asked for
    study = PressStudy(models=["M3"], split="series", n_tests=30, batch_size=30, cache=False,
                       register_model=False)  # fmt: skip
    result = run_flow(press_uncertainty, study, runner="thread", workers=1)
    client = Tracker(load_settings()).client
    parent = client.get_run(result.parent_run_id)
    assert parent.data.params["n_tests"] == "20"
    assert parent.data.params["design_model"] == "M3"  # the only candidate
    assert result.design["model"] == "M3" and "for M3" in result.markdown()
    assert parent.data.params["n_tests_requested"] == "30"
    (child,) = client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{result.parent_run_id}'"
    )
    assert child.data.params["n_tests"] == "20"
    assert len(child.data.metrics) and result.verdicts[0].model == "M3"
    assert any("allows 20 distinct tests" in w for w in result.warnings)
    # the outcome: run names, the run's description, the Prefect link and state message
    verdict = "rejected" if result.verdicts[0].rejected else "passes"
    assert child.info.run_name == f"M3 - {verdict}"
    assert parent.info.run_name == result.headline() == f"press: M3 {verdict}"
    assert parent.data.tags["mlflow.note.content"] == result.markdown()
    flow_run_id = parent.data.tags["prefect.flow_run_id"]
    assert child.data.tags["prefect.flow_run_id"] == flow_run_id
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags[EXPERIMENT_KIND[0]] == EXPERIMENT_KIND[1]

    async def flow_run() -> Any:
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        async with get_client() as prefect:
            tasks = await prefect.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
            return await prefect.read_flow_run(flow_run_id), {t.name for t in tasks}

    import asyncio

    run, task_names = asyncio.run(flow_run())
    # task runs say what they do
    assert {"fit M3", "tests M3 1-20", "verdict M3", "plan 30 series splits"} <= task_names
    assert run.state.message == result.headline()
    assert run.state.is_completed()
    stored = [json.loads(p.read_text()) for p in (tmp_path / "prefect" / "storage").iterdir()]
    persisted = [r for r in stored if r.get("__class__", "").endswith("PressResult")]
    assert persisted and persisted[0]["data"]["parent_run_id"] == result.parent_run_id


def test_the_design_model_is_the_setting_else_the_richest_candidate() -> None:
    from flows.press.flow import design_model_of
    from flows.press.settings import PressStudy

    # the built-in models all have the two stiffnesses: a tie goes to the last listed
    assert design_model_of(PressStudy(models=["M1", "M2"])) == ("M2", "most parameters")
    assert design_model_of(PressStudy()) == ("M3", "most parameters")
    chosen = PressStudy(models=["M1", "M3"], design_model="M1")
    assert design_model_of(chosen) == ("M1", "setting")

"""MLflow opens greylab's experiments in its model-training view from a fresh browser
profile, whichever way the user arrives: MLflow's home page -> the experiment, the
experiment's URL typed in (no query), a link greylab prints (run page), the run comparison.

Real parts: `deployments.mlflow_ui` in front of a real `mlflow server`, Debian's Chromium.
Without the server's default (plain `mlflow server`) the first two land on the GenAI
"Overview / Usage" page (checked by hand: same steps, `mlflow server`, 2026-12-05).
Screenshots in `build/browser-shots/mlflow-view-*.png`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.servers import chromium, fresh_page, mlflow_ui_server, shot

pytestmark = pytest.mark.browser


def _training_view(page: Any, run_name: str) -> None:
    """The model-training view of an experiment: its runs table with our run, the sidebar's
    model registry, and no GenAI overview page."""
    page.get_by_text(run_name).first.wait_for()
    page.get_by_text("Model registry").first.wait_for()
    assert "/overview" not in page.url and "workflowType=genai" not in page.url, page.url
    assert page.get_by_text("Token Usage").count() == 0


def test_mlflow_opens_greylab_experiments_in_the_training_view(tmp_path: Path,
                                                               monkeypatch) -> None:  # fmt: skip
    import mlflow

    with mlflow_ui_server(tmp_path) as uri, chromium() as browser:
        client = mlflow.MlflowClient(uri)
        experiment = client.create_experiment("press-uncertainty")
        runs = [client.create_run(experiment, run_name=name).info.run_id
                for name in ("M3 - passes", "M1 - rejected")]  # fmt: skip
        for run_id in runs:
            client.log_metric(run_id, "p_value", 0.5)
            client.set_terminated(run_id)

        # 1. MLflow's home page -> the experiment, as a lab user clicks through
        page = fresh_page(browser)
        page.goto(f"{uri}/")
        page.get_by_text("press-uncertainty").first.click()
        _training_view(page, "M3 - passes")
        assert re.search(r"#/experiments/\d+/runs", page.url)
        shot(page, "mlflow-view-1-home-to-experiment")

        # 2. the experiment's URL typed in, no query, another fresh profile
        page = fresh_page(browser)
        page.goto(f"{uri}/#/experiments/{experiment}")
        _training_view(page, "M1 - rejected")
        shot(page, "mlflow-view-2-direct-url")

        # 3. the link greylab puts in its artifacts (tracking.markdown.run_ref)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        from tracking.markdown import run_ref

        link = run_ref(runs[0], experiment)
        assert "workflowType=machine_learning" in link.url
        page = fresh_page(browser)
        page.goto(link.url)
        page.get_by_text("M3 - passes").first.wait_for()
        page.get_by_text("Model registry").first.wait_for()
        page.get_by_role("tab", name="Artifacts").wait_for()  # the training run page's tabs
        shot(page, "mlflow-view-3-greylab-link")

        # 4. the run comparison, opened directly in a fresh profile
        page = fresh_page(browser)
        ids = ",".join(f"%22{r}%22" for r in runs)
        page.goto(f"{uri}/#/compare-runs?runs=[{ids}]&experiments=[%22{experiment}%22]")
        page.get_by_text("M1 - rejected").first.wait_for()
        page.get_by_text("Model registry").first.wait_for()
        assert page.get_by_text("Token Usage").count() == 0
        shot(page, "mlflow-view-4-compare")

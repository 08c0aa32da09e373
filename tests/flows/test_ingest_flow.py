"""Flow `ingest-lab-data`: settings, the study trigger, and one real Prefect run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from flows import ingest_flow
from flows.ingest_flow import IngestSettings, run_ingest
from tasks import ingest as ingest_tasks
from tests.tasks.ingest_data import press_frame, write


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")
    monkeypatch.delenv("GREYLAB_DATA_ROOT", raising=False)


def test_folders_come_from_the_worker_configuration_not_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert IngestSettings().folders() == (
        tmp_path / "home" / "data" / "inbox",
        tmp_path / "home" / "data",
    )
    monkeypatch.setenv("GREYLAB_DATA_ROOT", str(tmp_path / "lab"))
    assert IngestSettings().folders() == (tmp_path / "lab" / "inbox", tmp_path / "lab")
    monkeypatch.setenv("GREYLAB_INBOX", str(tmp_path / "in"))
    assert IngestSettings().folders() == (tmp_path / "in", tmp_path / "lab")
    for field in ("inbox", "data_root"):  # a dashboard run cannot choose a folder
        with pytest.raises(ValidationError):
            IngestSettings.model_validate({field: str(tmp_path)})
    assert IngestSettings().settle_seconds > 0  # the scheduled deployment waits for uploads


def test_settings_reject_unknown_and_wrong_fields() -> None:
    with pytest.raises(ValidationError):
        IngestSettings.model_validate({"inbx": "x"})
    with pytest.raises(ValidationError):
        IngestSettings(settle_seconds=-1)
    for campaign in ("../x", "/etc", "Line-1"):
        with pytest.raises(ValidationError):
            IngestSettings(campaign=campaign)
    with pytest.raises(ValidationError):
        IngestSettings(experiment="../../../escape")
    assert IngestSettings(campaign="line-1").campaign == "line-1"


def test_deployment_settle_window_is_positive() -> None:
    from deployments.serve import load_definitions

    entry = next(d for d in load_definitions() if d["name"] == "ingest-lab-data")
    assert IngestSettings.model_validate(entry["parameters"]["settings"]).settle_seconds > 0


def test_study_trigger_runs_press_and_skips_drive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.press_flow

    seen: list[Any] = []
    monkeypatch.setattr(
        ingest_tasks, "campaign_table_task", lambda root, study, campaign: f"{root}/{campaign}.pq"
    )
    monkeypatch.setattr(
        flows.press_flow,
        "run_press_study",
        lambda study: seen.append(study) or {"parent_run_id": "run-1"},
    )
    done = ingest_flow._start_study("press", "line-1", tmp_path)
    assert done == {
        "study": "press",
        "campaign": "line-1",
        "status": "done",
        "data": f"{tmp_path}/line-1.pq",
        "parent_run_id": "run-1",
    }
    assert seen[0].data == f"{tmp_path}/line-1.pq"
    assert ingest_flow._start_study("drive", "rig", tmp_path)["status"] == "skipped"


def test_study_trigger_reports_bad_campaign_data_without_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(root: str, study: str, campaign: str) -> str:
        raise ingest_tasks.IngestError("series 0 lacks step(s) [3]")

    monkeypatch.setattr(ingest_tasks, "campaign_table_task", broken)
    result = ingest_flow._start_study("press", "line-1", tmp_path)
    assert result["status"] == "failed" and "lacks step" in result["reason"]


@pytest.mark.integration
def test_flow_ingests_tracks_and_triggers_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real flow (ephemeral Prefect server, SQLite MLflow in tmp); the press study itself
    is replaced by a recorder (its own tests run it)."""
    from prefect.settings import (
        PREFECT_HOME,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    import flows.press_flow
    from tasks.tracking import Tracker

    studies: list[Any] = []
    monkeypatch.setattr(
        flows.press_flow,
        "run_press_study",
        lambda study: studies.append(study) or {"parent_run_id": "press-run"},
    )
    rng = np.random.default_rng(11)
    root = tmp_path / "data"
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    write(inbox, "line-1__a.csv", press_frame(rng))
    write(inbox, "line-1__b.parquet", press_frame(rng, n_series=3))
    (inbox / "bad.csv").write_text("a,b\n1,2\n")

    updates = {
        PREFECT_HOME: tmp_path / "prefect",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 90,
    }
    with temporary_settings(updates=updates):
        result = run_ingest({"trigger_studies": True, "settle_seconds": 0}, data_root=root)

    assert result["counts"]["ingested"] == 2 and result["counts"]["quarantined"] == 1
    assert result["new_data"] == [{"study": "press", "campaign": "line-1"}]
    assert [s["status"] for s in result["studies"]] == ["done"]
    table = pd.read_parquet(studies[0].data)
    assert sorted(table["series"].unique()) == [0, 1, 2, 3, 4]
    run = Tracker().client.get_run(result["run_id"])
    assert run.data.metrics["ingested"] == 2 and run.data.metrics["rows"] == 16 + 24

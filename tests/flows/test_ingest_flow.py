"""Flow `ingest-lab-data`: settings, the study trigger on real ingested data, and real Prefect
runs (ephemeral server, SQLite MLflow store in tmp) checked against what is on disk and in
MLflow, so a flow that drops a file, skips the ledger or reports what it did not store fails."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from flows import ingest_flow
from flows.ingest_flow import IngestSettings, run_ingest
from ingestion.ledger import Ledger
from ingestion.readers import campaign_table, read_dataset
from ingestion.run import ingest_inbox
from tests.tasks.ingest_data import drive_frame, press_frame, write


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


def _lab(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "data"
    inbox = root / "inbox"
    inbox.mkdir(parents=True)
    return inbox, root


def _no_study(study: Any) -> dict[str, Any]:
    raise AssertionError(f"the press study must not start: {study}")


def test_study_trigger_runs_press_on_the_real_campaign_table_and_skips_drive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_home: None
) -> None:
    """The campaign table is built from the ingested parts; only the press study itself is
    replaced by a recorder (its own tests run it)."""
    import flows.press_flow

    inbox, root = _lab(tmp_path)
    rng = np.random.default_rng(3)
    write(inbox, "line-1__a.csv", press_frame(rng, n_series=2))
    write(inbox, "line-1__b.csv", press_frame(rng, n_series=3))
    write(inbox, "rig__c.csv", drive_frame(rng))
    assert ingest_inbox(inbox, root).count(ingest_flow.ingest_tasks.Status.ingested) == 3
    seen: list[Any] = []
    monkeypatch.setattr(
        flows.press_flow,
        "run_press_study",
        lambda study: seen.append(study) or SimpleNamespace(parent_run_id="run-1"),
    )
    done = ingest_flow._start_study("press", "line-1", root)
    assert {k: done[k] for k in ("study", "campaign", "status", "parent_run_id")} == {
        "study": "press",
        "campaign": "line-1",
        "status": "done",
        "parent_run_id": "run-1",
    }
    assert Path(done["data"]).parent == root / "campaigns" / "press" / "line-1"
    assert [s.data for s in seen] == [done["data"]]
    table = pd.read_parquet(done["data"])
    assert sorted(table["series"].unique()) == [0, 1, 2, 3, 4] and len(table) == 5 * 4 * 2
    pd.testing.assert_frame_equal(table, campaign_table(root, "press", "line-1"))
    monkeypatch.setattr(flows.press_flow, "run_press_study", _no_study)
    assert ingest_flow._start_study("drive", "rig", root)["status"] == "skipped"


def test_study_trigger_reports_bad_campaign_data_without_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_home: None
) -> None:
    """Each file is valid, their concatenation is not (4 steps, then 3)."""
    import flows.press_flow

    inbox, root = _lab(tmp_path)
    rng = np.random.default_rng(4)
    write(inbox, "line-1__a.csv", press_frame(rng, n_steps=4))
    write(inbox, "line-1__b.csv", press_frame(rng, n_steps=3))
    assert ingest_inbox(inbox, root).count(ingest_flow.ingest_tasks.Status.ingested) == 2
    monkeypatch.setattr(flows.press_flow, "run_press_study", _no_study)
    result = ingest_flow._start_study("press", "line-1", root)
    assert result["status"] == "failed" and "series 2 lacks step(s) [3]" in result["reason"]
    assert not (root / "campaigns").exists()


def _download_json(run_id: str, artifact: str, tmp_path: Path) -> dict[str, Any]:
    import json

    from tasks.tracking import Tracker

    folder = tmp_path / f"artifacts-{run_id}"
    folder.mkdir()
    return json.loads(
        Path(Tracker().client.download_artifacts(run_id, artifact, str(folder))).read_text()
    )


def _check_stored(root: Path, results: list[dict[str, Any]], inputs: list[pd.DataFrame]) -> None:
    """What the flow runs report is what is on disk: ledger, parts, archive, quarantine."""
    ledger = Ledger(root / "ledger.jsonl").read()
    ingested = [r for r in ledger if r["status"] == "ingested"]
    reported = [o for r in results for o in r["outcomes"] if o["status"] == "ingested"]
    assert sorted(r["sha256"] for r in ingested) == sorted(o["sha256"] for o in reported)
    for record in ingested:
        assert len(pd.read_parquet(root / record["part"])) == record["rows"]
        assert (root / "archive" / f"{record['sha256']}-{record['name']}").exists()
    assert [r["name"] for r in ledger if r["status"] == "quarantined"] == ["bad.csv"]
    assert "neither" in (root / "quarantine" / "bad.csv.error.txt").read_text()
    assert not list((root / "inbox").iterdir())
    stored = read_dataset(root, "press").drop(columns=["source_sha256", "campaign"])
    expected = pd.concat(inputs, ignore_index=True)
    key = ["force_N", "sensor", "displacement_um"]
    pd.testing.assert_frame_equal(
        stored.sort_values(key).reset_index(drop=True)[expected.columns],
        expected.sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One private Prefect home (and ephemeral server database) for this module's runs."""
    from prefect.settings import (
        PREFECT_HOME,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    updates = {
        PREFECT_HOME: tmp_path_factory.mktemp("prefect"),
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 90,
    }
    with temporary_settings(updates=updates):
        yield


def test_flow_ingests_tracks_and_triggers_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_home: None
) -> None:
    """Two real flow runs (ephemeral Prefect server, SQLite MLflow in tmp): the second one is
    idempotent for what is stored and takes only the new drive recording."""
    import flows.press_flow
    from tasks.tracking import Tracker

    studies: list[Any] = []
    monkeypatch.setattr(
        flows.press_flow,
        "run_press_study",
        lambda study: studies.append(study) or SimpleNamespace(parent_run_id="press-run"),
    )
    rng = np.random.default_rng(11)
    inbox, root = _lab(tmp_path)
    inputs = [press_frame(rng), press_frame(rng, n_series=3)]
    write(inbox, "line-1__a.csv", inputs[0])
    write(inbox, "line-1__b.parquet", inputs[1])
    (inbox / "bad.csv").write_text("a,b\n1,2\n")
    result = run_ingest({"trigger_studies": True, "settle_seconds": 0}, data_root=root)

    assert result["counts"]["ingested"] == 2 and result["counts"]["quarantined"] == 1
    assert result["new_data"] == [{"study": "press", "campaign": "line-1"}]
    assert [s["status"] for s in result["studies"]] == ["done"]
    table = pd.read_parquet(studies[0].data)
    assert sorted(table["series"].unique()) == [0, 1, 2, 3, 4]
    run = Tracker().client.get_run(result["run_id"])
    assert run.data.metrics["ingested"] == 2 and run.data.metrics["rows"] == 16 + 24
    assert run.data.metrics["quarantined"] == 1 and run.info.status == "FINISHED"
    tracked = _download_json(result["run_id"], "ingest/report.json", tmp_path)
    assert tracked == {k: result[k] for k in tracked}
    _check_stored(root, [result], inputs)

    # Second run: the same press content under a new name, and a drive recording.
    (inbox / "line-2__copy.parquet").write_bytes(
        next((root / "archive").glob("*-line-1__b.parquet")).read_bytes()
    )
    write(inbox, "rig__d.csv", drive_frame(rng))
    again = run_ingest({"trigger_studies": True, "settle_seconds": 0}, data_root=root)
    assert {k: v for k, v in again["counts"].items() if v} == {"ingested": 1, "duplicate": 1}
    assert again["rows"] == 40 and again["run_id"] != result["run_id"]
    assert again["new_data"] == [{"study": "drive", "campaign": "rig"}]
    assert [s["status"] for s in again["studies"]] == ["skipped"] and len(studies) == 1
    _check_stored(root, [result, again], inputs)  # press rows unchanged: none appended twice
    assert len(read_dataset(root, "drive")) == 40


def test_dry_run_flow_writes_nothing_and_tracks_nothing(tmp_path: Path, prefect_home: None) -> None:
    inbox, root = _lab(tmp_path)
    write(inbox, "line-1__a.csv", press_frame(np.random.default_rng(12)))
    result = run_ingest({"dry_run": True, "settle_seconds": 0}, data_root=root)
    assert result["dry_run"] and result["counts"]["ingested"] == 1
    assert result["run_id"] is None and result["tracking"] == {}
    assert sorted(p.name for p in root.iterdir()) == ["inbox"]
    assert [p.name for p in inbox.iterdir()] == ["line-1__a.csv"]

"""The ingestion recorder: one MLflow run per ingestion (real SQLite store), and the same
record in memory, including a failure while writing it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ingestion.run import ingest_inbox
from tasks.ingest import tasks as ingest
from tasks.ingest.records import IngestRecorder
from tests.tasks.ingest_data import press_frame, write
from tracking.memory import InMemoryTracker


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")


def _one_press_file(tmp_path: Path) -> tuple[Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    write(inbox, "line-1__a.csv", press_frame(np.random.default_rng(1)))
    return inbox, root


def test_log_ingestion_to_mlflow(tmp_path: Path) -> None:
    from tracking.mlflow_tracker import Tracker

    inbox, root = _one_press_file(tmp_path)
    (inbox / "bad.csv").write_text("x\n1\n")
    report = ingest_inbox(inbox, root)
    tracker = Tracker()
    run_id = ingest.log_ingestion(report, "ingest-test", tracker)
    run = tracker.client.get_run(run_id)
    assert run.data.metrics["ingested"] == 1 and run.data.metrics["quarantined"] == 1
    assert run.data.metrics["rows"] == 16
    assert run.data.tags["greylab.study"] == "ingest"
    artifacts = {a.path for a in tracker.client.list_artifacts(run_id, "ingest")}
    assert {"ingest/files.csv", "ingest/rejects.csv", "ingest/report.json"} <= artifacts


def test_recorder_in_memory_neutralises_formulas_and_skips_empty_rejects(tmp_path: Path) -> None:
    inbox, root = _one_press_file(tmp_path)
    (inbox / "=cmd.txt").write_text("not data")  # skipped: its name starts a formula
    report = ingest_inbox(inbox, root)
    tracker = InMemoryTracker()
    run_id = IngestRecorder("ingest-mem", tracker).record(report)
    run = tracker.runs[run_id]
    assert run.status == "FINISHED" and run.name == f"ingest {report.started}"
    assert run.params == {"inbox": str(inbox), "data_root": str(root), "dry_run": "false"}
    assert run.metric("files") == 2 and run.metric("skipped") == 1 and run.metric("rows") == 16
    files = run.artifacts["ingest/files.csv"]
    assert "'=cmd.txt" in set(files["name"])
    assert "ingest/rejects.csv" not in run.artifacts  # no quarantined or duplicate file
    assert run.artifacts["ingest/report.json"]["counts"]["ingested"] == 1


def test_recorder_ends_the_run_failed_when_writing_fails(tmp_path: Path) -> None:
    inbox, root = _one_press_file(tmp_path)
    report = ingest_inbox(inbox, root)

    class Broken(InMemoryTracker):
        def log_json(self, run_id: str, obj: object, artifact_file: str) -> None:
            raise OSError("artifact store full")

    tracker = Broken()
    with pytest.raises(OSError, match="store full"):
        IngestRecorder("ingest-mem", tracker).record(report)
    assert [r.status for r in tracker.runs.values()] == ["FAILED"]

"""`greylab compare`: runs are found by tags and lined up with the study's columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli import main
from flows.studies import DRIVE_RUNS, PRESS_RUNS
from runtime.settings import load_settings
from tracking.compare import comparison_figure, runs_table
from tracking.mlflow_tracker import Tracker


@pytest.fixture
def tracker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tracker:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")
    tracker = Tracker(load_settings())
    tracker.ensure_store()
    return tracker


def _press_study(tracker: Tracker, verdicts: dict[str, bool], k5: float) -> None:
    parent = tracker.start_run("press-uncertainty", "press-study", study="press")
    for model, rejected in verdicts.items():
        run = tracker.start_run(
            "press-uncertainty", f"model-{model}", study="press", parent_run_id=parent,
            tags={"greylab.data_hash": "abc123", "greylab.verdict": "rejected" if rejected else "passes",
                  "greylab.cache": "hit" if k5 < 5395 else "miss"},
        )  # fmt: skip
        tracker.log_params(run, {"model": model, "split": "random", "design": "110"})
        tracker.log_metrics(run, {"min_alpha": 1e-9 if rejected else 0.2, "threshold": 1e-3,
                                  "param.k5": k5, "stderr.k5": 19.0})  # fmt: skip
        tracker.end_run(run)
    tracker.end_run(parent)


def test_press_runs_table_and_figure(tracker: Tracker, tmp_path: Path) -> None:
    _press_study(tracker, {"M1": True, "M3": False}, 5400.0)
    _press_study(tracker, {"M2": True}, 5390.0)
    frame = runs_table("press", PRESS_RUNS, tracker=tracker)
    assert len(frame) == 3  # children only: the parents are not units of comparison
    assert list(frame.columns[:4]) == ["run_id", "start", "model", "verdict"]
    assert frame["model"].tolist() == ["M2", "M3", "M1"]  # newest first
    assert frame["cache"].tolist() == ["hit", "miss", "miss"]  # the cached study is told apart
    assert set(frame["verdict"]) == {"rejected", "passes"}
    assert frame["param.k5"].tolist() == [5390.0, 5400.0, 5400.0]
    assert frame["study_run"].nunique() == 2  # each child names the study run it belongs to
    assert runs_table("press", PRESS_RUNS, last=1, tracker=tracker)["model"].tolist() == ["M2"]
    assert runs_table("drive", DRIVE_RUNS, tracker=tracker).empty
    fig = comparison_figure(PRESS_RUNS, frame)
    assert len(fig.axes) == 2  # headline metric + one estimate panel (k5)


def test_compare_command_json(tracker: Tracker, tmp_path: Path, capsys) -> None:
    _press_study(tracker, {"M3": False}, 5400.0)
    figure = tmp_path / "cmp.png"
    assert main(["compare", "--study", "press", "--json", "--figure", str(figure)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in out["runs"]] == ["M3"]
    assert figure.stat().st_size > 1000
    assert main(["compare", "--study", "bogus"]) == 2
    assert "unknown study 'bogus'" in capsys.readouterr().err


def test_compare_fits_80_columns_and_shows_any_column_on_request(
    tracker: Tracker, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    _press_study(tracker, {"M1": True, "M3": False}, 5400.0)
    assert main(["compare", "--study", "press"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert rows and max(len(line) for line in rows) <= 80
    assert "more columns: --columns all" in out
    assert main(["compare", "--study", "press", "--columns", "model,stderr.k5,data_hash"]) == 0
    out = capsys.readouterr().out
    assert "19" in out and "abc123" in out and "verdict" not in out
    assert main(["compare", "--study", "press", "--columns", "all"]) == 0
    out = capsys.readouterr().out
    assert "  stderr.k5: 19" in out and "  data_hash: abc123" in out and "  commit: " in out
    assert main(["compare", "--study", "press", "--columns", "model,bogus"]) == 2
    assert "unknown column(s) ['bogus']; known: run_id" in capsys.readouterr().err

"""Tracking that costs less without recording less (issue 31).

A figure is drawn once for its PNG artifact and its MLflow image (`Tracker.log_figure`); the
artifact must be the image `savefig` gives (the oracle: matplotlib's own PNG of the same figure,
decoded), also for a figure with a layout engine, which `savefig` draws twice. A run's params,
tags and metrics are sent in few `log_batch` calls, and every value is in the store after."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def _figure(layout: str | None):  # the same figure each call (seeded data)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(7)
    fig, axes = plt.subplots(1, 2, figsize=(6, 3), layout=layout)
    axes[0].plot(rng.normal(size=50).cumsum(), label="walk")
    axes[0].legend()
    axes[1].scatter(*rng.normal(size=(2, 40)))
    axes[1].set_title("a title that a tight layout makes room for")
    return fig


@pytest.mark.parametrize("layout", [None, "tight", "constrained"])
def test_the_figure_artifact_is_the_png_savefig_gives(
    layout: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/m.db")
    monkeypatch.delenv("GREYLAB_ARTIFACT_ROOT", raising=False)
    from tracking.mlflow_tracker import Tracker

    tracker = Tracker()
    tracker.ensure_store()
    run_id = tracker.start_run("figures", "r", study="test")
    tracker.log_figure(run_id, _figure(layout), "figures/f.png")
    tracker.end_run(run_id)

    oracle = io.BytesIO()
    _figure(layout).savefig(oracle, format="png")
    local = tracker.client.download_artifacts(run_id, "figures/f.png", str(tmp_path))
    ours = np.asarray(Image.open(local))
    theirs = np.asarray(Image.open(io.BytesIO(oracle.getvalue())))
    assert ours.shape == theirs.shape
    assert np.array_equal(ours, theirs)  # pixel for pixel: nothing recorded is lost
    images = [a.path for a in tracker.client.list_artifacts(run_id, "images")]
    assert images, "the image for MLflow's run comparison is missing"


def _tracker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # a fresh SQLite store
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/m.db")
    from tracking.mlflow_tracker import Tracker

    tracker = Tracker()
    tracker.ensure_store()
    return tracker


def test_a_runs_values_go_in_few_batches_and_all_arrive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = _tracker(tmp_path, monkeypatch)
    calls: list[tuple[int, int, int]] = []
    real = tracker.client.log_batch

    def counted(run_id: str, metrics=(), params=(), tags=(), **kw):  # type: ignore[no-untyped-def]
        calls.append((len(params), len(tags), len(metrics)))
        return real(run_id, metrics=metrics, params=params, tags=tags, **kw)

    monkeypatch.setattr(tracker.client, "log_batch", counted)
    run_id = tracker.start_run("batching", "r", study="test")
    params = {f"p{i}": i for i in range(250)}  # over MLflow's 100 params per call
    tags = {f"t{i}": f"v{i}" for i in range(150)}
    for i in range(0, 250, 10):  # 25 calls, as the recorders make them
        tracker.log_params(run_id, dict(list(params.items())[i : i + 10]))
    tracker.set_tags(run_id, tags)
    tracker.set_tags(run_id, {"t0": "last"})  # set twice: the last value stands, as before
    tracker.log_metrics(run_id, {"m": 1.5, "n": 2.0})
    tracker.log_series(run_id, "s", np.arange(2500.0))  # over 1000 metrics per call
    assert calls == []  # nothing sent while the run is open
    tracker.end_run(run_id)
    assert all(p <= 100 and t <= 100 and p + t + m <= 1000 for p, t, m in calls), calls
    # max(ceil(250 / 100) params, ceil(150 / 100) tags, ceil((250 + 150 + 2502) / 1000) in all)
    assert len(calls) == 3
    run = tracker.client.get_run(run_id)
    assert run.data.params == {k: str(v) for k, v in params.items()}
    assert {k: run.data.tags[k] for k in tags} == {**tags, "t0": "last"}
    assert run.data.metrics["m"] == 1.5 and run.data.metrics["n"] == 2.0
    history = tracker.client.get_metric_history(run_id, "s")
    assert sorted((h.step, h.value) for h in history) == [(i, float(i)) for i in range(2500)]
    assert run.info.status == "FINISHED"
    # an ended run (a flow names its parent after the outcome): sent at once
    tracker.set_tags(run_id, {"mlflow.runName": "named after"})
    assert tracker.client.get_run(run_id).info.run_name == "named after"


def test_a_param_logged_again_with_another_value_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.exceptions import MlflowException

    tracker = _tracker(tmp_path, monkeypatch)
    run_id = tracker.start_run("batching", "r", study="test")
    tracker.log_params(run_id, {"a": 1})
    tracker.log_params(run_id, {"a": 1})  # the same value again is fine, as in MLflow
    with pytest.raises(MlflowException):
        tracker.log_params(run_id, {"a": 2})
        tracker.end_run(run_id)
    assert tracker.client.get_run(run_id).data.params == {"a": "1"}


def test_a_figure_given_as_a_builder_is_built_after_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In this process: before the answer nothing is built here. (With a second core a forked
    child may draw it meanwhile: tests/flows/test_figures_early.py; here it is off, so the
    builder runs here, after the answer.)"""
    from runtime import deferred, figures

    monkeypatch.setenv(figures.CHILD_ENV, "0")
    from tracking.memory import InMemoryTracker
    from tracking.recorder import Run

    tracker = InMemoryTracker()
    run = Run(tracker, tracker.start_run("e", "r", study="test"))
    built: list[str] = []

    def build():  # type: ignore[no-untyped-def]
        built.append("now")
        return _figure("tight")

    deferred.enable()
    try:
        run.figure(build, "figures/late.png")
        run.figure(_figure(None), "figures/early.png")  # a built figure, as before
        assert built == [] and deferred.pending() == 2  # nothing built before the answer
        assert deferred.run_deferred() == []
    finally:
        deferred.enable(False)
    assert built == ["now"]
    artifacts = tracker.runs[run.id].artifacts
    assert artifacts["figures/late.png"][:4] == artifacts["figures/early.png"][:4] == b"\x89PNG"
    deferred.defer(lambda: None)  # deferral off again: a builder is built at once
    run.figure(build, "figures/now.png")
    assert built == ["now", "now"] and "figures/now.png" in tracker.runs[run.id].artifacts

"""What each study recorder records, on real results of tiny studies, with the in-memory
tracker; and the same keys and values through MLflow (a SQLite store in a temporary folder).

Oracles: the result objects themselves (p-values, estimates, verdicts), the documented
content hash recomputed here from the stored file, and the settings as given."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tracking.memory import InMemoryTracker, RecordedRun

PNG = b"\x89PNG\r\n\x1a\n"
MODELS = ["M1", "M2"]
N_TESTS = 4
MODEL_FILES = {"model/MLmodel", "model/artifacts/spec.json", "model/input_example.json"}  # +env


def _documented_hash(path: str) -> str:
    """The content hash as documented (sha256 of pandas' per-row hashes, then of the
    (column, dtype) list as JSON), computed from the stored file."""
    frame = pd.read_parquet(path)
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    digest = hashlib.sha256(rows.tobytes())
    digest.update(json.dumps([[str(c), str(t)] for c, t in frame.dtypes.items()]).encode())
    return digest.hexdigest()


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# -- press ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def press(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real press study on the digital twin (M2 truth), two models, four random splits."""
    from flows.press.flow import PressStudy
    from tasks.press import tasks

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GREYLAB_HOME", str(tmp_path_factory.mktemp("press-home")))
        loaded = tasks.load_measurements.fn(None, None, {"truth": "M2", "seed": 1})
        path = tasks.correct.fn(loaded["path"])
        sigma = loaded["sigma"]
        report = tasks.normality.fn(path)
        design = tasks.design.fn(MODELS[0], path, 2, "E", sigma)
        sensors = design.best_sensors
        splits = tasks.plan_splits.fn(path, "random", N_TESTS, 0, 0.5)
        fits, detections = {}, {}
        for model in MODELS:
            fits[model] = tasks.fit.fn(model, path, sensors, sigma)
            rows = tasks.test_batch.fn(model, path, sensors, sigma, splits, "difference")
            detections[model] = tasks.verdict.fn(
                [rows], 0.05, "bonferroni", N_TESTS, model, "random", "difference"
            )
    study = PressStudy(models=MODELS, n_tests=N_TESTS, experiment="recorders")
    return dict(loaded=loaded, path=path, report=report, design=design, sensors=sensors,
                fits=fits, detections=detections, study=study)  # fmt: skip


def _record_press(press: dict[str, Any], tracker: Any) -> str:
    from tasks.cache import CacheUse
    from tasks.press.records import PressRecorder

    recorder = PressRecorder("recorders", tracker)
    use = CacheUse(cached=["correct"], computed=["normality"])
    with recorder.session(press["study"].model_dump(mode="json")) as parent:
        recorder.lineage(press["loaded"]["path"], press["loaded"]["source"])
        recorder.normality(press["report"])
        recorder.design(press["design"])
        recorder.cache(use)
        verdicts = []
        for model in MODELS:
            det = press["detections"][model]
            run_id, _ = recorder.model_run(
                model, press["study"], press["fits"][model], det, press["sensors"], press["path"]
            )
            verdicts.append({"model": model, "rejected": bool(det.rejected), "run_id": run_id,
                             "parameters": press["fits"][model].parameters})  # fmt: skip
        recorder.verdicts(verdicts)
    return parent


def test_press_recorder(press: dict[str, Any]) -> None:
    tracker = InMemoryTracker()
    parent_id = _record_press(press, tracker)
    parent = tracker.runs[parent_id]
    assert tracker.store_ready and parent.status == "FINISHED" and parent.name == "press-study"
    assert parent.tags["greylab.study"] == "press" and parent.tags["greylab.kind"] == "parent"
    settings = press["study"].model_dump(mode="json")
    expected = {k: v if isinstance(v, str) else json.dumps(v) for k, v in settings.items()}
    expected = {k: v for k, v in expected.items() if settings[k] is not None}
    assert parent.params == expected | {
        "design": str(press["design"].best["code"]), "design_method": "enumeration",
        "design_budget": "exactly 2 sensors", "design_second_order": "at the all-sensor fit",
    }  # fmt: skip
    digest = _documented_hash(press["loaded"]["path"])
    assert parent.tags["greylab.data_hash"] == digest == press["loaded"]["hash"]
    assert parent.tags["greylab.data_source"] == press["loaded"]["source"] == "twin:seed=1,truth=M2"
    assert parent.tags["greylab.cache"] == "partial"
    assert parent.tags["greylab.cached_steps"] == "correct"
    table = press["report"].table
    assert parent.metrics == {
        f"normality.p.{s}": [(0, float(p))] for s, p in zip(table["sensor"], table["p_value"])
    } | {
        "n_models_rejected": [(0, float(sum(d.rejected for d in press["detections"].values())))]
    } | {f"{m}.rejected": [(0, float(d.rejected))] for m, d in press["detections"].items()}
    # (per model on the parent: MLflow's comparison of parent runs shows every verdict)
    assert set(parent.artifacts) == {"normality.json", "design.json", "design.csv",
                                     "figures/design.png", "figures/design_curve.png",
                                     "cache.json", "verdicts.csv"}  # fmt: skip
    assert parent.artifacts["cache.json"] == {"status": "partial", "cached": ["correct"],
                                              "computed": ["normality"]}  # fmt: skip
    assert parent.artifacts["figures/design.png"].startswith(PNG)
    assert list(parent.artifacts["verdicts.csv"].columns) == ["model", "rejected", "run_id"]
    children = tracker.children(parent_id)
    names = {m: "rejected" if press["detections"][m].rejected else "passes" for m in MODELS}
    assert [c.name for c in children] == [f"{m} - {names[m]}" for m in MODELS]  # the outcome
    for child, model in zip(children, MODELS):
        _check_press_child(child, press, model, digest)
        (version,) = tracker.models[f"press-{model}"]  # one study: one version per model
        assert version["run_id"] == child.run_id
        assert version["source"] == f"runs:/{child.run_id}/model"
        assert version["tags"]["greylab.data_hash"] == digest
        assert version["tags"]["greylab.verdict"] == child.tags["greylab.verdict"]
        assert version["tags"]["greylab.sensors"] == ",".join(press["sensors"])
        assert child.tags["greylab.model_uri"] == f"models:/press-{model}/1"


def _check_press_child(child: RecordedRun, press: dict[str, Any], model: str, digest: str) -> None:
    fit, det = press["fits"][model], press["detections"][model]
    assert child.status == "FINISHED" and child.parent_run_id is not None
    assert child.tags["mlflow.parentRunId"] == child.parent_run_id
    assert child.tags["greylab.kind"] == "child" and child.tags["greylab.data_hash"] == digest
    assert child.tags["greylab.cache"] == "partial"
    verdict = "inconclusive" if det.inconclusive else "rejected" if det.rejected else "passes"
    assert child.tags["greylab.verdict"] == verdict
    assert ("detected" in det.verdict) == (verdict == "rejected")
    assert child.params == {
        "model": model, "sensors": ",".join(press["sensors"]), "design": str(press["design"].best["code"]),
        "split": "random", "tol": "0.05", "n_tests": str(N_TESTS), "statistic": "difference",
        "correction": "bonferroni", "seed": "0", "calibration_fraction": "0.5", "paper": "false",
    }  # fmt: skip
    alpha = [v for _, v in child.metrics["p_value"]]  # per test (before 2026-12-05: alpha_min)
    assert [s for s, _ in child.metrics["p_value"]] == list(range(N_TESTS))
    assert all(_same(a, float(b)) for a, b in zip(alpha, det.alpha_min, strict=True))
    for name, value in fit.parameters.items():
        assert child.metric(f"param.{name}") == float(value)
        assert child.metric(f"stderr.{name}") == float(fit.standard_errors[name])
    assert child.metric("min_alpha") == float(np.nanmin(det.alpha_min))
    assert child.metric("rejected") == float(det.rejected)
    assert child.metric("threshold") == float(det.threshold)
    assert child.metric("fit_cost") == float(fit.cost)
    assert set(child.metrics) == {"p_value", "rejected", "n_rejections", "n_failed",
                                  "inconclusive", "min_alpha", "threshold", "fit_cost"} | {
        f"{kind}.{name}" for kind in ("param", "stderr") for name in fit.parameters
    }  # fmt: skip
    assert {a for a in child.artifacts if not a.startswith("model/")} == {"fit.json", "ellipsoid.json", "detection.json",
        "tests.csv", "figures/ellipsoid.png", "figures/hysteresis.png"}  # fmt: skip
    assert MODEL_FILES <= set(child.artifacts)
    spec = child.artifacts["model/artifacts/spec.json"]
    assert spec["kind"] == "press" and spec["model"] == model
    assert spec["fit"]["parameters"] == json.loads(json.dumps(fit.parameters))
    assert child.artifacts["fit.json"] == json.loads(json.dumps(fit.to_dict()))
    assert len(child.artifacts["tests.csv"]) == N_TESTS
    assert child.artifacts["figures/hysteresis.png"].startswith(PNG)


def test_a_failing_session_ends_failed() -> None:
    from tasks.press.records import PressRecorder

    tracker = InMemoryTracker()
    recorder = PressRecorder("recorders", tracker)
    with pytest.raises(ZeroDivisionError), recorder.session({"n_tests": 3}):
        with recorder.child_run("model-M1"):
            1 / 0  # noqa: B018
    parent, child = tracker.runs.values()
    assert parent.status == "FAILED" and child.status == "FAILED"
    assert parent.params == {"n_tests": "3"}
    with pytest.raises(RuntimeError, match="not open"):
        PressRecorder("recorders", tracker).run_id  # noqa: B018  (no session: no run)


# -- drive ---------------------------------------------------------------------------------
def _record_drive(drive: dict[str, Any], tracker: Any) -> str:
    from tasks.drive.records import DriveRecorder

    recorder = DriveRecorder("recorders", tracker)
    with recorder.session({"population": 4, "generations": 2, "data": None}) as run_id:
        recorder.lineage(drive["path"], "reference:test")
        for g, best in drive["bests"]:
            recorder.generation(g, best)
        recorder.result(drive["search"], drive["recording"])
    return run_id


def test_drive_recorder(drive: dict[str, Any]) -> None:
    tracker = InMemoryTracker()
    run = tracker.runs[_record_drive(drive, tracker)]
    search = drive["search"]
    assert list(tracker.runs) == [run.run_id] and run.status == "FINISHED"
    assert run.name == "drive-search" and run.tags["greylab.study"] == "drive"
    structure = ",".join(search.best_structure_)
    assert run.params == {"population": "4", "generations": "2", "best_structure": structure,
                          "best_codes": ",".join(map(str, search.best_codes_))}  # fmt: skip
    assert run.tags["greylab.data_hash"] == _documented_hash(drive["path"])
    assert Path(drive["path"]).stem == run.tags["greylab.data_hash"]  # content-addressed name
    assert run.datasets == [{"name": "drive", "source": Path(drive["path"]).resolve().as_uri(),
                             "digest": run.tags["greylab.data_hash"][:36]}]  # fmt: skip
    assert run.tags["greylab.best_structure"] == structure
    assert (run.tags["greylab.cache"], run.tags["greylab.cached_steps"]) == ("miss", "-")
    assert [g for g, _ in drive["bests"]] == [0, 1]
    for key, attr in (("best_fitness", "fitness"), ("best_rss", "rss")):
        assert run.metrics[key] == [(g, float(getattr(b, attr))) for g, b in drive["bests"]]
    assert run.metric("n_evaluations") == float(search.n_evaluations_)
    assert run.metric("n_timed_out") == float(len(search.timed_out_)) == 0.0  # (120 s each)
    for name, value in search.best_parameters_.items():
        assert run.metric(f"param.{name}") == float(value)
    assert set(run.metrics) == {"best_fitness", "best_rss", "n_evaluations", "n_timed_out"} | {
        f"param.{name}" for name in search.best_parameters_
    }
    assert set(run.artifacts) == {"history.csv", "convergence.csv", "population.csv", "polish.csv",
                                  "state_space.json", "result.json", "selection.json",
                                  "figures/fit.png", "figures/convergence.png"}  # fmt: skip
    assert run.artifacts["selection.json"] == search.selection_
    pd.testing.assert_frame_equal(run.artifacts["history.csv"], search.history_)
    pd.testing.assert_frame_equal(run.artifacts["polish.csv"], search.polish_)
    assert run.artifacts["figures/fit.png"].startswith(PNG)


# -- inverse -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inverse() -> list[Any]:
    """A real solve (two-mass system, coarse steps) and a real failure (unknown system)."""
    from tasks.inverse import tasks

    ok = tasks.simulate.fn("two_mass", {}, None, "bdf2", 2e-2, None, True, None, False)
    bad = tasks.simulate.fn("no_such_system", {}, None, "bdf2", 2e-2, None, True, None, False)
    assert ok.ok and not bad.ok
    return [ok, bad]


def _record_inverse(outcomes: list[Any], tracker: Any) -> str:
    from tasks.inverse.records import InverseRecorder

    recorder = InverseRecorder("recorders", tracker)
    settings = {"systems": ["two_mass"], "method": "bdf2", "dt": 0.02, "demand": None}
    with recorder.session(settings) as parent:
        rows = []
        for outcome in outcomes:
            run_id = recorder.child(outcome, demand=None, t_end=None)
            rows.append({**outcome.to_dict(), "run_id": run_id})
        keys = ("system", "status", "max_constraint_violation", "tracking_error", "run_id")
        recorder.summary([{k: r.get(k) for k in keys} for r in rows])
        recorder.failed = True
    return parent


def test_inverse_recorder(inverse: list[Any]) -> None:
    ok, bad = inverse
    tracker = InMemoryTracker()
    parent = tracker.runs[_record_inverse(inverse, tracker)]
    assert parent.status == "FAILED" and parent.name == "inverse-study"
    assert parent.params == {"systems": '["two_mass"]', "method": "bdf2", "dt": "0.02",
                             "demand": "default"}  # fmt: skip
    assert set(parent.artifacts) == {"study.json", "summary.csv"}
    assert parent.metrics == {
        "n_simulations": [(0, 2.0)], "n_failed": [(0, 1.0)],
        "max_constraint_violation": [(0, float(ok.result.max_constraint_violation))],
        "tracking_error": [(0, float(ok.forward.max_error))],
    }  # fmt: skip
    good, failed = tracker.children(parent.run_id)
    assert good.name == "two_mass bdf2 20 ms" and good.status == "FINISHED"
    assert failed.name == "no_such_system bdf2 20 ms - failed"
    assert good.tags["greylab.verdict"] == "ok" and good.tags["greylab.study"] == "inverse"
    t_end = float(ok.result.table["t_s"].iloc[-1])
    assert good.params == {"system": "two_mass", "method": "bdf2", "dt": "0.02",
                           "demand": "default", "overrides": "{}", "t_end": json.dumps(t_end)} | {
        k: json.dumps(v) for k, v in ok.parameters.items()
    }  # fmt: skip
    assert good.metric("max_constraint_violation") == float(ok.result.max_constraint_violation)
    assert good.metric("tracking_error") == float(ok.forward.max_error)
    assert good.metric("n_steps") == float(ok.result.n_steps)
    for output, error in ok.forward.max_tracking_error.items():
        assert good.metric(f"tracking_error.{output}") == float(error)
    assert {"newton_iterations_total", "wall_time_s", "rank_CB", "rank_ok"} <= set(good.metrics)
    assert ("error_vs_exact" in good.metrics) == bool(ok.error_vs_exact)
    assert set(good.artifacts) == {"system.json", "trajectory.parquet", "rank_info.json",
                                   "result.json", "figures/trajectory.png",
                                   "figures/velocities.png"}  # fmt: skip
    pd.testing.assert_frame_equal(good.artifacts["trajectory.parquet"], ok.result.table)
    assert failed.status == "FAILED" and failed.tags["greylab.verdict"] == "failed"
    assert failed.tags["greylab.error"] == bad.error and failed.metrics == {}
    assert set(failed.artifacts) == {"result.json"}
    assert failed.params == {"system": "no_such_system", "method": "bdf2", "dt": "0.02",
                             "demand": "default", "overrides": "{}"}  # fmt: skip


# -- MLflow and in memory record the same ----------------------------------------------------
def _mlflow_records(tracker: Any, parent_id: str) -> dict[str, Any]:
    client = tracker.client
    parent = client.get_run(parent_id)
    runs = [parent, *client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'",
        order_by=["attributes.start_time ASC"],
    )]  # fmt: skip
    return {run.info.run_name: _mlflow_run(client, run) for run in runs}


def _mlflow_run(client: Any, run: Any) -> dict[str, Any]:
    def artifacts(path: str | None = None) -> set[str]:
        found: set[str] = set()
        for item in client.list_artifacts(run.info.run_id, path):
            found |= artifacts(item.path) if item.is_dir else {item.path}
        return found

    metrics = {
        key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        for key in run.data.metrics
    }
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("greylab.")}
    stored = artifacts()
    images = {a for a in stored if a.startswith("images/")}  # figures logged by key as well
    for figure in (a for a in stored if a.startswith("figures/")):
        key = Path(figure).stem
        assert any(Path(i).name.startswith(f"{key}+step+") for i in images), figure
    return dict(status=run.info.status, params=run.data.params, tags=tags, metrics=metrics,
                artifacts=stored - images, parent="mlflow.parentRunId" in run.data.tags)  # fmt: skip


def _memory_records(tracker: InMemoryTracker) -> dict[str, Any]:
    return {
        run.name: dict(status=run.status, params=run.params,
                       tags={k: v for k, v in run.tags.items() if k.startswith("greylab.")},
                       metrics={k: sorted(v) for k, v in run.metrics.items()},
                       artifacts=set(run.artifacts), parent=run.parent_run_id is not None)
        for run in tracker.runs.values()
    }  # fmt: skip


@pytest.mark.parametrize("study", ["press", "drive", "inverse"])
def test_mlflow_and_memory_record_the_same(
    study: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    record = {"press": _record_press, "drive": _record_drive, "inverse": _record_inverse}[study]
    result = request.getfixturevalue(study)
    env = {"GREYLAB_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/m.db"}
    mlflow = Tracker(load_settings(env))
    stored = _mlflow_records(mlflow, record(result, mlflow))
    memory = InMemoryTracker()
    record(result, memory)
    kept = _memory_records(memory)
    assert list(stored) == list(kept)
    assert len(kept) == {"press": 1 + len(MODELS), "drive": 1, "inverse": 3}[study]
    for name, run in kept.items():
        other = stored[name]
        for part in ("status", "params", "tags", "artifacts", "parent"):
            assert other[part] == run[part], (name, part)
        assert set(other["metrics"]) == set(run["metrics"]), name
        for key, values in run["metrics"].items():
            assert len(other["metrics"][key]) == len(values), (name, key)
            assert all(s == t and _same(a, b) for (s, a), (t, b) in
                       zip(values, other["metrics"][key])), (name, key)  # fmt: skip

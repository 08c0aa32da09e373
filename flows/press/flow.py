"""Flow `press-uncertainty`: validate -> correct -> normality -> design -> per model: fit with
ellipsoid, then calibration/validation tests in parallel batches -> verdicts, all tracked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow
from prefect.futures import as_completed

from flows.artifacts import finish, flow_run_tags, once_for_bad_input
from flows.press.settings import PressStudy
from flows.progress import Progress
from flows.runners import RunnerKind, run_flow
from tasks.cache import CacheUse, cached
from tasks.press import tasks as press_tasks
from tasks.press.records import PressRecorder
from tasks.press.result import ModelVerdict, PressResult, verdict_word

#: the Prefect form's defaults (a complete form, not an optional one collapsed to None)
DEFAULT_STUDY = PressStudy()


@flow(name="press-uncertainty", log_prints=True, persist_result=True, result_serializer="json")
def press_uncertainty(study: PressStudy = DEFAULT_STUDY) -> PressResult:
    recorder = PressRecorder(study.experiment)
    settings = study.model_dump(mode="json")
    with recorder.session(
        settings, tags=flow_run_tags(), defer={"n_tests", "design_model"}
    ) as parent:
        result = _run(study, recorder)
    outcome = PressResult(**result, parent_run_id=parent, tracking=recorder.tracker.ui_hint(),
                          experiment_id=recorder.experiment_id())  # fmt: skip
    return finish(outcome, "press-result", "verdict per candidate model", recorder)


class _Steps:
    """The press tasks of one run, cached (or forced to recompute) as the study says, and a
    record of which steps came from the cache."""

    def __init__(self, enabled: bool) -> None:
        self.use = CacheUse()
        self.correct = cached(press_tasks.correct, enabled=enabled)
        self.normality = cached(press_tasks.normality, enabled=enabled)
        self.design = cached(press_tasks.design, enabled=enabled)
        self.fit = cached(press_tasks.fit, enabled=enabled)
        self.plan_splits = cached(press_tasks.plan_splits, enabled=enabled)
        self.test_batch = cached(press_tasks.test_batch, enabled=enabled)

    def call(self, step: str, task: Any, *args: Any) -> Any:
        state = task(*args, return_state=True)
        self.use.record(step, state)
        return state.result()

    def corrected_table(self, path: str) -> str:
        """The corrected table's path; a cached path whose file was deleted is recomputed."""
        corrected = self.call("correct", self.correct, path)
        if not Path(corrected).exists():
            self.use.cached.remove("correct")
            corrected = self.call("correct", self.correct.with_options(refresh_cache=True), path)
        return corrected


def _run(study: PressStudy, recorder: PressRecorder) -> dict[str, Any]:
    """validate -> correct -> normality -> design -> fits and tests -> verdicts."""
    twin = None if study.data else {"truth": study.twin_truth.value, "seed": study.twin_seed}
    loaded = once_for_bad_input(press_tasks.load_measurements)(study.data, study.sensor_sheet, twin)
    sigma = loaded["sigma"]
    recorder.lineage(loaded["path"], loaded["source"], digest=loaded["hash"])
    steps = _Steps(study.cache)
    path = steps.corrected_table(loaded["path"])
    report = steps.call("normality", steps.normality, path)
    recorder.normality(report)
    warnings = _normality_warnings(report)
    design_model, chosen_by = design_model_of(study)
    design = steps.call(
        "design", steps.design, design_model, path, study.n_sensors, study.criterion.value, sigma,
        study.max_sensors, loaded["costs"], study.budget, study.design_refit,
    )  # fmt: skip
    sensors = design.best_sensors
    recorder.design(design, design_model)
    splits = steps.call(
        "plan-splits", steps.plan_splits, path, study.split.value, study.n_tests, study.seed,
        study.calibration_fraction,
    )  # fmt: skip
    recorder.tests_planned(study.n_tests, len(splits))
    if len(splits) < study.n_tests:
        warnings.append(f"split {study.split.value} allows {len(splits)} distinct tests: "
                        f"ran {len(splits)} of the {study.n_tests} asked for")  # fmt: skip
    fits, rows = _fit_and_test(study, steps, path, sensors, sigma, splits)
    recorder.cache(steps.use)
    verdicts = []
    for model in study.models:
        detection = press_tasks.verdict(
            [rows[model][i] for i in sorted(rows[model])], study.tol, study.correction.value,
            len(splits), model, study.split.value, study.statistic.value,
        )  # fmt: skip
        fit = fits[model].result()
        warnings += [f"{model}: {w}" for w in (*fit.warnings, *detection.warnings)]
        run_id, model_uri = recorder.model_run(model, study, fit, detection, sensors, path)
        verdicts.append(_verdict(model, fit, detection, run_id, model_uri))
    recorder.verdicts([v.to_dict() for v in verdicts])
    return {
        "data_hash": loaded["hash"],
        "sensors": sensors,
        "design": {**design.to_dict(), "model": design_model, "model_chosen_by": chosen_by},
        "normality": report.to_dict(),
        "verdicts": tuple(verdicts),
        "warnings": tuple(warnings),
        "cache": steps.use.to_dict(),
        "paper": study.paper,
        "statistic": study.statistic.value,  # with `paper`: the paper's
        "correction": study.correction.value,
    }


def design_model_of(study: PressStudy) -> tuple[str, str]:
    """The model the sensor design uses and why (`choose_design_model`)."""
    return choose_design_model(study.models, study.design_model)


def choose_design_model(models: list[str], chosen: str | None = None) -> tuple[str, str]:
    """The model the sensor design uses and why: ``chosen`` if given, else the candidate with
    the most parameters (the design must identify the richest model; ties: the last listed).
    One rule for `greylab press design` and the flow."""
    if chosen:
        return chosen, "setting"
    from models.registry import resolve_model

    counts = [(len(resolve_model(m).parameters), i, m) for i, m in enumerate(models)]
    return max(counts)[2], "most parameters"


def _normality_warnings(report: Any) -> list[str]:
    if report.all_normal:
        return []
    failing = report.table.loc[~report.table["normal"].astype(bool), "sensor"].tolist()
    return [
        f"measurement errors of sensor(s) {failing} fail the Shapiro-Wilk test at 5 %: "
        "the covariance and the tests assume Gaussian errors, so treat the verdicts with care"
    ]


def _fit_and_test(
    study: PressStudy, steps: _Steps, path: str, sensors: list[str], sigma: Any, splits: list
) -> tuple[dict[str, Any], dict[str, dict[int, Any]]]:
    """Submit the full-data fit and the test batches of every model; returns the fit futures
    and the test rows per model and batch index (progress reported as batches finish)."""
    size = study.batch_size
    batches = [splits[i : i + size] for i in range(0, len(splits), size)]
    fits = {m: steps.fit.submit(m, path, sensors, sigma) for m in study.models}
    futures = {
        steps.test_batch.submit(model, path, sensors, sigma, batch, study.statistic.value): (
            model, index, len(batch),
        )
        for model in study.models
        for index, batch in enumerate(batches)
    }  # fmt: skip
    progress = Progress("tests", len(splits) * len(study.models), key="press-tests")
    rows: dict[str, dict[int, Any]] = {m: {} for m in study.models}
    for fut in as_completed(list(futures)):
        model, index, n = futures[fut]
        rows[model][index] = fut.result()
        progress.advance(n)
    for model, fit_future in fits.items():
        fit_future.wait()
        steps.use.record(f"fit {model}", fit_future.state)
        for fut, (owner, index, _) in futures.items():
            if owner == model:
                steps.use.record(f"tests {model} #{index + 1}", fut.state)
    return fits, rows


def _verdict(model: str, fit: Any, detection: Any, run_id: str, model_uri: str) -> ModelVerdict:
    return ModelVerdict(
        model=model,
        verdict=verdict_word(bool(detection.rejected), bool(detection.inconclusive)),
        rejected=bool(detection.rejected),
        n_rejections=int(detection.n_rejections),
        n_failed=int(detection.n_failed),
        inconclusive=bool(detection.inconclusive),
        min_alpha=float(np.nanmin(detection.alpha_min, initial=np.inf)),
        threshold=float(detection.threshold),
        parameters=fit.parameters,
        standard_errors=fit.standard_errors,
        run_id=run_id,
        model_uri=model_uri,
    )


def run_press_study(
    study: PressStudy, *, runner: RunnerKind | str = "thread", workers: int = 2
) -> PressResult:
    """Run the flow with a chosen task runner (threads, or a Dask cluster)."""
    return run_flow(press_uncertainty, study, runner=runner, workers=workers)

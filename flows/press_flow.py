"""Flow `press-uncertainty`: validate -> correct -> normality -> design -> per model: fit with
ellipsoid, then calibration/validation tests in parallel batches -> verdicts, all tracked."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
from prefect import flow
from prefect.futures import as_completed
from pydantic import BaseModel, ConfigDict, Field, field_validator

from flows.progress import Progress
from flows.runners import RunnerKind, run_flow
from methods.press.design import Criterion
from methods.press.hypothesis import Correction, Statistic
from methods.press.splits import SplitKind
from tasks import press as press_tasks
from tasks.cache import CacheUse, cached
from tasks.press_records import PressRecorder
from tasks.tracking import validate_experiment_name


class Truth(StrEnum):
    M1 = "M1"
    M2 = "M2"
    M3 = "M3"


class PressStudy(BaseModel):
    """Settings of one press model-uncertainty study (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid")

    data: str | None = Field(None, description="Measurement table (CSV/Parquet); empty = twin")
    sensor_sheet: str | None = Field(
        None, description="sensor,sigma_um table; empty = from repeats"
    )
    twin_truth: Truth = Field(Truth.M3, description="Friction model of the digital twin")
    twin_seed: int = Field(1, description="Seed of the digital twin")
    models: list[str] = Field(
        default_factory=lambda: ["M1", "M2", "M3"],
        min_length=1,
        description="Candidate models: built-in names, or plugins the worker allows "
        "(entry points 'greylab.models', GREYLAB_ALLOWED_MODELS); never imported from here",
    )
    n_sensors: int | None = Field(
        2, ge=1, description="Sensors to keep by optimal design; empty = keep all"
    )
    criterion: Criterion = Criterion.E
    n_tests: int = Field(50, ge=1, le=100_000)
    tol: float = Field(0.05, gt=0, lt=1)
    split: SplitKind = SplitKind.RANDOM
    calibration_fraction: float = Field(0.5, gt=0, lt=1)
    statistic: Statistic = Statistic.DIFFERENCE
    correction: Correction = Correction.BONFERRONI
    seed: int = 0
    batch_size: int = Field(25, ge=1, description="Splits per Prefect task")
    experiment: str = "press-uncertainty"
    cache: bool = Field(
        True,
        description="Reuse results of identical steps (same table contents, model code and "
        "greylab numerics); false recomputes every step",
    )

    # Flow parameters may come from the dashboard: they name code only through the worker's
    # allow-list (models/registry.py) and stay within the machine's limits (tasks/limits.py).
    @field_validator("models")
    @classmethod
    def _models(cls, value: list[str]) -> list[str]:
        from models.registry import check_model_reference
        from tasks import limits

        limits.check("models", len(value), "GREYLAB_MAX_MODELS")
        return [check_model_reference(m) for m in value]

    @field_validator("n_tests")
    @classmethod
    def _n_tests(cls, value: int) -> int:
        from tasks import limits

        limits.check("n_tests", value, "GREYLAB_MAX_TESTS")
        return value

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)


@flow(name="press-uncertainty", log_prints=True)
def press_uncertainty(study: PressStudy | None = None) -> dict[str, Any]:
    study = study or PressStudy()
    recorder = PressRecorder(study.experiment)
    with recorder.session(study.model_dump(mode="json")) as parent:
        result = _run(study, recorder)
    return {**result, "parent_run_id": parent, "tracking": recorder.tracker.ui_hint()}


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
    twin = None if study.data else {"truth": study.twin_truth.value, "seed": study.twin_seed}
    loaded = press_tasks.load_measurements(study.data, study.sensor_sheet, twin)
    sigma = loaded["sigma"]
    recorder.lineage(loaded["path"], loaded["source"])
    steps = _Steps(study.cache)
    path = steps.corrected_table(loaded["path"])
    report = steps.call("normality", steps.normality, path)
    recorder.normality(report)
    warnings: list[str] = []
    if not report.all_normal:
        failing = report.table.loc[~report.table["normal"].astype(bool), "sensor"].tolist()
        warnings.append(
            f"measurement errors of sensor(s) {failing} fail the Shapiro-Wilk test at 5 %: "
            "the covariance and the tests assume Gaussian errors, so treat the verdicts with care"
        )

    design = steps.call(
        "design",
        steps.design,
        study.models[0],
        path,
        study.n_sensors,
        study.criterion.value,
        sigma,
    )
    sensors = design.best_sensors
    recorder.design(design)

    splits = steps.call(
        "plan-splits",
        steps.plan_splits,
        path,
        study.split.value,
        study.n_tests,
        study.seed,
        study.calibration_fraction,
    )
    batches = [splits[i : i + study.batch_size] for i in range(0, len(splits), study.batch_size)]
    fits = {m: steps.fit.submit(m, path, sensors, sigma) for m in study.models}
    futures = {
        steps.test_batch.submit(model, path, sensors, sigma, batch, study.statistic.value): (
            model,
            index,
            len(batch),
        )
        for model in study.models
        for index, batch in enumerate(batches)
    }
    progress = Progress("tests", len(splits) * len(study.models), key="press-tests")
    rows: dict[str, dict[int, Any]] = {m: {} for m in study.models}
    for fut in as_completed(list(futures)):
        model, index, size = futures[fut]
        rows[model][index] = fut.result()
        progress.advance(size)
    for model, fit_future in fits.items():
        fit_future.wait()
        steps.use.record(f"fit {model}", fit_future.state)
        for fut, (owner, index, _) in futures.items():
            if owner == model:
                steps.use.record(f"tests {model} #{index + 1}", fut.state)
    recorder.cache(steps.use)

    verdicts = []
    for model in study.models:
        detection = press_tasks.verdict(
            [rows[model][i] for i in sorted(rows[model])],
            study.tol,
            study.correction.value,
            len(splits),
            model,
            study.split.value,
            study.statistic.value,
        )
        fit = fits[model].result()
        warnings += [f"{model}: {w}" for w in (*fit.warnings, *detection.warnings)]
        run_id = recorder.model_run(model, study, fit, detection, sensors, path)
        verdicts.append(
            {
                "model": model,
                "verdict": detection.verdict,  # "... detected", "passes", "inconclusive"
                "rejected": bool(detection.rejected),
                "n_rejections": int(detection.n_rejections),
                "n_failed": int(detection.n_failed),
                "inconclusive": bool(detection.inconclusive),
                "min_alpha": float(np.nanmin(detection.alpha_min, initial=np.inf)),
                "threshold": float(detection.threshold),
                "parameters": fit.parameters,
                "standard_errors": fit.standard_errors,
                "run_id": run_id,
            }
        )
    recorder.verdicts(verdicts)
    return {
        "data_hash": loaded["hash"],
        "sensors": sensors,
        "design": design.to_dict(),
        "normality": report.to_dict(),
        "verdicts": verdicts,
        "warnings": warnings,
        "cache": steps.use.to_dict(),
    }


def run_press_study(study: PressStudy, *, runner: RunnerKind | str = "thread", workers: int = 2):
    """Run the flow with a chosen task runner (threads, or a Dask cluster)."""
    return run_flow(press_uncertainty, study, runner=runner, workers=workers)

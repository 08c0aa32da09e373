"""Prefect tasks of the press study: one numerical step each, thin over `methods`.

Tables travel between tasks as content-addressed Parquet paths (`schemas.storage`), models as
references (`"M3"` or `package.module:attribute`), so every input is small, hashable for the
cache and picklable for process/Dask workers. Results are the core's frozen result objects.

Cache: the numerical steps are cached across runs by `tasks.cache.StudyCache`, keyed on the
table *contents* behind the paths, the model's code and the greylab numerics (never on a path
or a model name alone). The flow attaches the cache folder and expiry (`tasks.cache.cached`).

Retries: only reading files from disk can fail transiently; a diverged fit or a failed test is
a result, not something to retry blindly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task

import methods
from methods.press.data import to_cube
from methods.press.design.sensors import SensorDesign
from methods.press.lsq.estimation import ParameterFit
from methods.press.uncertainty import hypothesis
from methods.press.uncertainty.detection import Detection
from methods.press.uncertainty.normality import NormalityReport
from methods.press.uncertainty.splits import Split
from models.plugin_code import fresh_model_module
from models.press import simulate_press
from models.registry import resolve_model
from runtime.settings import load_settings
from schemas.press import (
    load_candidate_sheet,
    load_press_table,
    load_sensor_sheet,
    validate_press_table,
)
from schemas.storage import content_hash, store_table
from tasks.cache import StudyCache

TABLE = StudyCache(tables=("path",), module_file=__file__)
TABLE_AND_MODEL = StudyCache(tables=("path",), models=("model",), module_file=__file__)


def _tables_dir() -> Path:
    return load_settings().data_root / "press" / "tables"


def _read(path: str) -> pd.DataFrame:
    return pd.read_parquet(path)


def _model(reference: str) -> Any:
    """The model object, re-imported first if its plugin source changed in this process."""
    fresh_model_module(reference)
    return resolve_model(reference)


@task(name="load-press-measurements", retries=2, retry_delay_seconds=2, persist_result=False)
def load_measurements(
    data: str | None,
    sensor_sheet: str | None,
    twin: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate a lab file (or simulate the digital twin) and store it as Parquet.

    Returns `{"path", "hash", "source", "sigma", "costs"}`; `sigma` is None when no sheet was
    given (the methods then estimate it from the repeated series), `costs` when the sheet has
    no cost column.
    """
    if data is not None:
        table = load_press_table(data)
        source = str(Path(data).resolve())
        sigma, costs = None, None
        if sensor_sheet is not None:
            sigma = load_sensor_sheet(sensor_sheet, sensors=sorted(table["sensor"].unique()))
            costs = load_candidate_sheet(sensor_sheet)[1]
    else:
        settings = dict(twin or {})
        table, sheet = simulate_press(**settings)
        table = validate_press_table(table, source="digital twin")
        source = "twin:" + ",".join(f"{k}={v}" for k, v in sorted(settings.items()))
        sigma, costs = dict(zip(sheet["sensor"], sheet["sigma_um"].astype(float))), None
    digest = content_hash(table)
    path = store_table(table, _tables_dir(), digest)
    return {"path": str(path), "hash": digest, "source": source, "sigma": sigma, "costs": costs}


def _tests_run_name() -> str:
    """`tests M3 26-50`: the model and the (1-based) tests of a batch."""
    from prefect.runtime import task_run

    parameters = task_run.parameters
    numbers = [int(split.test) + 1 for split in parameters.get("splits", [])]
    span = f" {min(numbers)}-{max(numbers)}" if numbers else ""
    return f"tests {parameters.get('model', '')}{span}"


@task(name="correct-to-setpoints", task_run_name="correct to setpoints", cache_policy=TABLE)
def correct(path: str) -> str:
    """Map every series to the setpoint forces along its own branch; returns the new path."""
    corrected = methods.correct_to_setpoints(_read(path))
    return str(store_table(corrected, _tables_dir(), content_hash(corrected)))


@task(name="check-normality", task_run_name="normality of the errors", cache_policy=TABLE)
def normality(path: str, alpha: float = 0.05) -> NormalityReport:
    return methods.check_normality(_read(path), alpha=alpha)


@task(
    name="design-sensors", task_run_name="design {criterion} {model}", cache_policy=TABLE_AND_MODEL
)
def design(
    model: str,
    path: str,
    n_sensors: int | None,
    criterion: str,
    sigma: dict | None,
    max_sensors: int | None = None,
    costs: dict | None = None,
    budget: float | None = None,
    refit: bool = False,
) -> SensorDesign:
    return methods.sensor_design(
        _model(model), _read(path), n_sensors=n_sensors, criterion=criterion, sigma=sigma,
        max_sensors=max_sensors, costs=costs, budget=budget, refit=refit,
    )  # fmt: skip


@task(name="fit-model", task_run_name="fit {model}", cache_policy=TABLE_AND_MODEL)
def fit(model: str, path: str, sensors: Sequence[str], sigma: dict | None) -> ParameterFit:
    return methods.fit_parameters(_model(model), _read(path), sensors=list(sensors), sigma=sigma)


@task(name="plan-splits", task_run_name="plan {n_tests} {kind} splits", cache_policy=TABLE)
def plan_splits(path: str, kind: str, n_tests: int, seed: int, fraction: float) -> list[Split]:
    cube = to_cube(_read(path))
    return hypothesis.make_splits(
        kind, cube.setpoints, cube.loading, cube.z.shape[0], n_tests, seed, fraction
    )


@task(name="test-split-batch", task_run_name=_tests_run_name, cache_policy=TABLE_AND_MODEL)
def test_batch(
    model: str,
    path: str,
    sensors: Sequence[str],
    sigma: dict | None,
    splits: Sequence[Any],
    statistic: str,
) -> pd.DataFrame:
    """Calibration/validation fits and the test statistic for a batch of splits."""
    prepared = hypothesis.prepare(_model(model), _read(path), sensors=list(sensors), sigma=sigma)
    return hypothesis.run_split_batch(prepared, list(splits), statistic=statistic)


@task(name="combine-tests", task_run_name="verdict {model}", persist_result=False)
def verdict(
    rows: Sequence[pd.DataFrame],
    tol: float,
    correction: str,
    n_tests: int,
    model: str,
    split: str,
    statistic: str,
) -> Detection:
    """All test batches of one model -> `Detection` (multiple-testing correction, verdict)."""
    return hypothesis.combine_tests(
        list(rows), tol, correction, n_tests=n_tests, model=model, split=split, statistic=statistic
    )

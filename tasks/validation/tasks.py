"""The validation study's task: load a model product, validate it on new data, record the
evaluation run and tag the registered versions.

`validate_and_record` is the one implementation: the `model-validation` flow runs it as the
task `validate_task`, and `greylab press|drive validate` call it directly (no flow: one load
and one simulation). The numerics are the pure core's (`products.validation.validate_model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from products.validation import EXPERIMENT, ValidationOutcome, ValidationRecorder, validate_model
from tasks.validation.result import ValidationResult


def validate_and_record(
    kind: str,
    model_uri: str,
    data: str | Path,
    *,
    sheet: str | Path | None = None,
    emps_decimate: int | None = None,
    experiment: str = EXPERIMENT,
    track: bool = True,
    tags: Mapping[str, str] | None = None,
    recorder: ValidationRecorder | None = None,
) -> ValidationOutcome:
    """Validate the `kind` model at `model_uri` on `data`; with `track`, log the evaluation
    run (through `recorder`, default a new `ValidationRecorder(kind, experiment)`, with
    `tags` on the run), named after its outcome (`ValidationResult.headline`), and tag the
    model's registered versions. Bad input (a model that cannot be loaded, data that does not
    fit it) is an `InputError` before anything is recorded."""
    outcome = validate_model(
        model_uri, Path(data), kind=kind, sheet=Path(sheet) if sheet else None,
        emps_decimate=emps_decimate,
    )  # fmt: skip
    if not track:
        return outcome
    recorder = recorder if recorder is not None else ValidationRecorder(kind, experiment)
    recorded = recorder.record(outcome, tags=dict(tags or {}))
    result = ValidationResult.of(recorded, recorder.experiment_id())
    recorder.outcome(recorder.run, result.headline(), result.markdown())
    return recorded


#: the flow's task: no cache (a rerun is a new validation, recorded again), nothing persisted
#: (the outcome carries the data table); one retry for what may pass on a second try (the
#: flow removes the retry for bad input: `flows.artifacts.once_for_bad_input`)
validate_task = task(
    name="validate-model", task_run_name="validate {model_uri}", retries=1,
    retry_delay_seconds=2, cache_policy=NO_CACHE, persist_result=False,
)(validate_and_record)  # fmt: skip

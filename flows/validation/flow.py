"""Flow `model-validation`: a registered model on new data, rerunnable from the Prefect UI.

settings (`flows/validation/settings.py`: a registered name and a version or alias, data by
reference or inside the worker's data folders) -> one task (`tasks.validation.tasks`: load the
model product without running its code, validate it with the pure core, log the MLflow
evaluation run and tag the registered versions, exactly what `greylab press|drive validate`
do) -> `flows.artifacts.finish`: the `validation-summary` and `validation-result` artifacts,
the flow run and the MLflow run named after the outcome. Bad input (no such model or version,
data that does not fit the model) fails the run once, with the message, without retries.
Entry point for deployments: `flows/validation/flow.py:model_validation`; for the CLI and the
Python API: `run_validation_flow`.
"""

from __future__ import annotations

from prefect import flow

from flows.artifacts import finish, flow_run_tags, once_for_bad_input
from flows.runners import RunnerKind, run_flow
from flows.validation.settings import ModelValidation
from tasks.validation.records import ValidationRecorder
from tasks.validation.result import ValidationResult
from tasks.validation.tasks import validate_task

__all__ = ["ModelValidation", "model_validation", "run_validation_flow"]


@flow(name="model-validation", log_prints=True, persist_result=True, result_serializer="json")
def model_validation(settings: ModelValidation) -> ValidationResult:
    """Validate `settings.model` (version or alias `settings.version`) on `settings.data`."""
    kind = settings.kind.value
    recorder = ValidationRecorder(kind, settings.experiment)
    outcome = once_for_bad_input(validate_task)(
        kind, settings.model_uri(), settings.data, sheet=settings.sensor_sheet,
        emps_decimate=settings.emps_decimate, experiment=settings.experiment,
        tags=flow_run_tags(), recorder=recorder,
    )  # fmt: skip
    print(outcome.summary)
    result = ValidationResult.of(outcome, recorder.experiment_id())
    return finish(result, "validation-result", "metrics per output of the validated model",
                  recorder)  # fmt: skip


def run_validation_flow(
    settings: ModelValidation, *, runner: RunnerKind | str = "thread"
) -> ValidationResult:
    """Run the flow once in this process (`greylab validation run`, the Python API)."""
    result: ValidationResult = run_flow(model_validation, settings, runner=runner, workers=1)
    return result

"""`greylab validation run`: a registered model on new data, through the `model-validation`
flow (the same flow the dashboard reruns; tracked in MLflow).

    greylab validation run --model press-M3 [--version champion|3] --data FILE|campaign:NAME
        [--kind press|drive] [--sheet FILE] [--emps-decimate N] [--experiment NAME] [--json]

The options are the fields of `ModelValidation` (flows/validation/settings.py). `greylab press
validate` and `greylab drive validate` stay the quick way without a flow (any model URI, a
figure, `--no-track`); both record the same evaluation run (`tasks.validation.tasks`).
"""

from __future__ import annotations

import typer

from flows.cli_common import JsonOpt, emit, stderr, stdout
from flows.cli_settings import with_settings
from flows.validation.settings import ModelValidation

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Validate a registered model on new data, as the model-validation flow (tracked).",
    no_args_is_help=True,
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="validation")


@app.command()
@with_settings(ModelValidation)
def run(settings: ModelValidation, as_json: JsonOpt = False) -> None:
    """Validate a registered model version (or alias) on new data: the metrics per output,
    the MLflow evaluation run and the validation tags of the version. Exit 2 when the model
    cannot be loaded or the data does not fit it."""
    from flows.cli_validate import metrics_table
    from flows.validation.flow import run_validation_flow

    result = run_validation_flow(settings)

    def human() -> None:
        stdout.print(metrics_table(f"Validation of {result.model} on {result.data}",
                                   result.metrics))  # fmt: skip
        stdout.print(result.headline())
        for warning in result.warnings:
            stderr.print(f"warning: {warning}")
        tagged = ", ".join(result.versions) or "no registered version"
        stderr.print(f"MLflow evaluation run {result.run_id}; tagged {tagged}")

    emit(result.to_dict(), as_json=as_json, human=human)

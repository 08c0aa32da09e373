"""`greylab press validate` and `greylab drive validate`: a registered model on new data.

Both commands load the model product, validate it (`products.validation`), print the metrics per
output, save a figure if asked, and (unless `--no-track`) log an MLflow evaluation run and tag
the model's registered versions with the result: the task code of the `model-validation` flow
(`tasks.validation.tasks.validate_and_record`), called without a flow. Exit 2 when the data
does not match the model. `greylab validation run` runs the flow itself (registered models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli_common import (
    FIGURE_SUFFIXES,
    OVERWRITE_HELP,
    check_output,
    emit,
    save_figure,
    stderr,
    stdout,
    table,
)
from products.validation import EXPERIMENT, ValidationOutcome

ExperimentOpt = Annotated[str, typer.Option(help="MLflow experiment of the evaluation run.")]
TrackOpt = Annotated[bool, typer.Option("--track/--no-track", help="Log an MLflow evaluation run.")]
FigureOpt = Annotated[
    Path | None,
    typer.Option(help="Also save the measured-vs-predicted figure here (.png, .pdf, .svg)."),
]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)]


def run_validation(
    kind: str,
    model_uri: str,
    data: Path,
    *,
    sheet: Path | None = None,
    emps_decimate: int | None = None,
    experiment: str = EXPERIMENT,
    track: bool = True,
    figure: Path | None = None,
    overwrite: bool = False,
    as_json: bool = False,
) -> None:
    from tasks.validation.tasks import validate_and_record
    from tracking.protocol import validate_experiment_name

    validate_experiment_name(experiment)
    if figure is not None:  # before anything is loaded or tracked
        check_output(figure, option="--figure", suffixes=FIGURE_SUFFIXES, overwrite=overwrite)
    outcome = validate_and_record(
        kind,
        model_uri,
        data,
        sheet=sheet,
        emps_decimate=emps_decimate,
        experiment=experiment,
        track=track,
    )  # the flow's task code
    if figure is not None:
        from products.validation import validation_figure

        save_figure(validation_figure(outcome), figure, overwrite=overwrite)
    result = outcome.to_dict() | {"figure": str(figure) if figure else None}
    emit(result, as_json=as_json, human=lambda: print_validation(outcome, figure))


def metrics_table(title: str, metrics: dict[str, dict[str, float]]) -> Any:
    """RMSE, fit, R^2, max |error| and n per output (`methods.validation.output_metrics`)."""
    rows = [[out, m["rmse"], m["fit"], m["r2"], m["max_abs"], int(m["n"])]
            for out, m in metrics.items()]  # fmt: skip
    return table(title, ["output", "RMSE", "fit %", "R^2", "max |error|", "n"], rows)


def print_validation(outcome: ValidationOutcome, figure: Path | None) -> None:
    title = f"Validation of {outcome.model_uri} on {outcome.data}"
    stdout.print(metrics_table(title, outcome.metrics))
    stdout.print(outcome.summary)
    for warning in outcome.warnings:
        stderr.print(f"warning: {warning}")
    if figure is not None:
        stdout.print(f"figure: {figure}")
    if outcome.run_id:
        tagged = ", ".join(outcome.versions) or "no registered version (a runs:/ model)"
        stderr.print(f"MLflow evaluation run {outcome.run_id}; tagged {tagged}")

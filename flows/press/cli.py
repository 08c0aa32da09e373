"""`greylab press …`: simulate the digital twin, design sensors, detect model uncertainty."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli_common import (
    OVERWRITE_HELP,
    TABLE_SUFFIXES,
    JsonOpt,
    allow_typed_models,
    check_output,
    emit,
    frame_table,
    progress_bars,
    split_lists,
    stderr,
    stdout,
    table,
    write_table,
)
from flows.cli_settings import with_settings
from flows.cli_validate import (
    EXPERIMENT,
    ExperimentOpt,
    FigureOpt,
    OverwriteOpt,
    TrackOpt,
    run_validation,
)
from flows.press.settings import PressStudy
from methods.errors import InputError
from tasks.press.result import PressResult

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Model-uncertainty detection for the press (docs/methods.md §1).",
    no_args_is_help=True,
)

#: `press simulate --series`: at most this many (each series is 29 steps x 3 sensors)
MAX_SERIES = 1000
AllowModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-model",
        help="A plugin model (package.module:attr) the model's spec may name; as --model of "
        "press detect (a spec's plugin is otherwise only loaded when the worker allows it).",
    ),
]


def register(root: typer.Typer) -> None:
    from flows.press import cli_design

    cli_design.register(app)
    root.add_typer(app, name="press")


@app.command()
def simulate(
    out: Annotated[Path, typer.Option(help="Measurement table to write (.csv or .parquet).")],
    truth: Annotated[str, typer.Option(help="True friction model: M1, M2 or M3.")] = "M3",
    seed: Annotated[int, typer.Option(help="Random seed (0 or more).", min=0)] = 1,
    series: Annotated[
        int,
        typer.Option(help=f"Number of measurement series (1-{MAX_SERIES}).", min=1, max=MAX_SERIES),
    ] = 6,
    sheet: Annotated[
        Path | None, typer.Option(help="Sensor sheet to write (default: <out>.sensors.csv).")
    ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)] = False,
    as_json: JsonOpt = False,
) -> None:
    """Simulate lab measurements of the press with the digital twin."""
    from models.press import simulate_press

    if truth not in {"M1", "M2", "M3"}:
        raise InputError(f"--truth must be M1, M2 or M3, got '{truth}'")
    sheet = sheet or out.with_suffix(".sensors.csv")
    check_output(out, option="--out", suffixes=TABLE_SUFFIXES, overwrite=overwrite)
    check_output(sheet, option="--sheet", suffixes=TABLE_SUFFIXES, overwrite=overwrite)
    if sheet.absolute() == out.absolute():
        raise InputError(f"--sheet {sheet}: the same file as --out; name another")
    frame, sensor_sheet = simulate_press(truth=truth, seed=seed, n_series=series)
    write_table(frame, out, overwrite=overwrite)
    write_table(sensor_sheet, sheet, option="--sheet", overwrite=overwrite)
    result = {"out": str(out), "sensor_sheet": str(sheet), "rows": len(frame), "truth": truth}
    emit(
        result,
        as_json=as_json,
        human=lambda: stdout.print(
            f"wrote {len(frame)} rows ({series} series, truth {truth}) to {out}; sensor sheet {sheet}"
        ),
    )


def _load(data: Path, sheet: Path | None) -> tuple[Any, dict[str, float] | None]:
    from schemas.press import load_press_table, load_sensor_sheet

    frame = load_press_table(data)
    sigma = None
    if sheet is not None:
        sigma = load_sensor_sheet(sheet, sensors=sorted(frame["sensor"].unique()))
    return frame, sigma


@app.command()
def check(
    data: Annotated[Path, typer.Option(help="Measurement table (.csv or .parquet).")],
    sheet: Annotated[Path | None, typer.Option(help="Sensor sheet (sensor,sigma_um).")] = None,
    alpha: Annotated[float, typer.Option(help="Significance of Shapiro-Wilk.")] = 0.05,
    as_json: JsonOpt = False,
) -> None:
    """Validate a measurement table (and sheet) and check normality of the errors per sensor."""
    import methods

    frame, _ = _load(data, sheet)
    report = methods.check_normality(methods.correct_to_setpoints(frame), alpha=alpha)

    def human() -> None:
        title = f"{data}: valid; normality of errors (Shapiro-Wilk, {alpha})"
        stdout.print(frame_table(title, report.table))

    emit(report.to_dict(), as_json=as_json, human=human)


def _allow_typed_models(options: dict[str, Any]) -> None:
    """The models the CLI user typed: allowed and importable (`allow_typed_models`)."""
    typed = split_lists(options["models"])
    allow_typed_models(typed + ([options["design_model"]] if options.get("design_model") else []))


@app.command()
@with_settings(PressStudy, prepare=_allow_typed_models)
def detect(
    study: PressStudy,
    runner: Annotated[str, typer.Option(help="thread or dask.")] = "thread",
    workers: Annotated[int, typer.Option(help="Parallel workers.")] = 2,
    as_json: JsonOpt = False,
) -> None:
    """Calibrate every model, test it on calibration/validation splits, give verdicts."""
    from flows.press.flow import run_press_study
    from models.registry import resolve_model

    if study.data is not None:
        _load(Path(study.data), Path(study.sensor_sheet) if study.sensor_sheet else None)
    for reference in study.models:
        resolve_model(reference)  # fail fast on a wrong model, before any server starts
    with progress_bars(enabled=not as_json):
        result = run_press_study(study, runner=runner, workers=workers)
    emit(result.to_dict(), as_json=as_json, human=lambda: print_press_result(result))


@app.command()
def validate(
    model: Annotated[
        str, typer.Option(help="Model URI: models:/press-M3/1, runs:/<run id>/model.")
    ],
    data: Annotated[Path, typer.Option(help="Measurement table not used for fitting.")],
    sheet: Annotated[
        Path | None, typer.Option(help="Sensor sheet (sensor,sigma_um); default: the fit's.")
    ] = None,
    experiment: ExperimentOpt = EXPERIMENT,
    track: TrackOpt = True,
    figure: FigureOpt = None,
    overwrite: OverwriteOpt = False,
    allow_model: AllowModelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict a calibrated model on new measurements: RMSE, fit, R^2 per sensor, normalised
    residuals and the share outside the 95 % prediction band (docs/methods.md §4). The model
    is rebuilt from its spec by greylab: no code that came with the model folder runs."""
    if allow_model:
        allow_typed_models(split_lists(allow_model))
    run_validation("press", model, data, sheet=sheet, experiment=experiment, track=track,
                   figure=figure, overwrite=overwrite, as_json=as_json)  # fmt: skip


def print_press_result(result: PressResult) -> None:
    rows = []
    for v in result.verdicts:
        estimates = ", ".join(
            f"{k}={val:.4g}±{v.standard_errors[k]:.2g}" for k, val in v.parameters.items()
        )
        rows.append([v.model, v.verdict, v.n_rejections, v.n_failed, v.min_alpha, v.threshold,
                     estimates])  # fmt: skip
    columns = ["model", "verdict", "rejections", "failed", "min alpha", "threshold",
               "estimates ± s.e."]  # fmt: skip
    stdout.print(table(f"Press study (sensors {', '.join(result.sensors)})", columns, rows))
    design = result.design
    if design.get("model"):
        stdout.print(f"sensor design: {design.get('criterion')}-optimal for {design['model']} "
                     f"({design.get('model_chosen_by')})")  # fmt: skip
    for warning in result.warnings:
        stderr.print(f"warning: {warning}")
    print_cache_use(result.cache)
    stderr.print(f"MLflow parent run {result.parent_run_id}; look: {result.tracking}")


def print_cache_use(use: dict[str, Any] | None) -> None:
    """One line on stderr: which steps came from the cache (never silent about a hit)."""
    if not use or not use["cached"]:
        return
    computed = f"; recomputed: {', '.join(use['computed'])}" if use["computed"] else ""
    stderr.print(
        f"cache {use['status']}: from cache: {', '.join(use['cached'])}{computed} "
        "(--no-cache recomputes)",
        markup=False,
    )

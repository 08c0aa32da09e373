"""`greylab demo`, `compare` and `serve`: the commands that are not one study's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli_common import (
    FIGURE_SUFFIXES,
    OVERWRITE_HELP,
    check_output,
    emit,
    format_cell,
    progress_bars,
    save_figure,
    split_list,
    stderr,
    stdout,
    table,
)
from flows.studies import STUDIES, compared
from methods.errors import InputError

MAX_LAST = 10_000  # `compare --last`: runs (or versions per name) read from MLflow
_STUDY_HELP = (
    f"{', '.join(compared())} (with --models: {', '.join(s.name for s in STUDIES if s.products)})."
)


def register(app: typer.Typer) -> None:
    app.command()(demo)
    app.command()(compare)
    app.command()(serve)


def serve(
    only: Annotated[
        str | None, typer.Option(help="Comma-separated deployment names; default all.")
    ] = None,
) -> None:
    """Serve the deployments of deployments/prefect.yaml against the configured Prefect
    server (PREFECT_API_URL), so runs can be started from the Prefect UI."""
    from deployments.serve import serve as serve_deployments
    from runtime.settings import load_settings

    if not load_settings().prefect_api_url:
        stderr.print(
            "PREFECT_API_URL is not set: serving against an ephemeral server that the UI cannot "
            "reach. Start one with `prefect server start --host 127.0.0.1` and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    serve_deployments(split_list(only) if only else None)


def compare(
    study: Annotated[str | None, typer.Option(help=_STUDY_HELP)] = None,
    experiment: Annotated[str | None, typer.Option(help="Only this MLflow experiment.")] = None,
    last: Annotated[
        int,
        typer.Option(
            help=f"How many most recent runs (versions per name), 1-{MAX_LAST}.",
            min=1,
            max=MAX_LAST,
        ),
    ] = 20,
    figure: Annotated[
        Path | None,
        typer.Option(
            help="Comparison figure (.png, .pdf, .svg); default under GREYLAB_HOME "
            "(replaced each time)."
        ),
    ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)] = False,
    models: Annotated[
        bool, typer.Option("--models", help="Registered model versions instead of runs.")
    ] = False,
    columns: Annotated[
        str | None,
        typer.Option(
            help="Columns to show, comma-separated (names as in --json), or all (one block "
            "per run, nothing cut); default: a few that fit 80 columns."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Table of tracked runs of a study (read from MLflow) and a comparison figure; with
    `--models` the registered model versions with their newest validation."""
    from runtime.settings import load_settings
    from tracking.compare import comparison_figure, runs_table

    wanted = split_list(columns) if columns else None
    if models:
        compare_models(study, last, as_json, wanted)
        return
    if study is None:
        raise InputError(f"give --study {'|'.join(compared())}, or --models")
    if study not in compared():
        raise InputError(f"unknown study '{study}'; choose one of {sorted(compared())}")
    spec = compared()[study]
    if figure is not None:  # the user's file: never replaced silently
        check_output(figure, option="--figure", suffixes=FIGURE_SUFFIXES, overwrite=overwrite)
    frame = runs_table(study, spec, experiment=experiment, last=last)
    out = None
    if not frame.empty:
        out = figure or load_settings().home / f"compare-{study}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        save_figure(comparison_figure(spec, frame), out, overwrite=overwrite or figure is None)
    records = (
        frame.assign(start=frame["start"].astype(str)).to_dict("records") if len(frame) else []
    )
    result = {"study": study, "runs": records, "figure": str(out) if out else None}

    def human() -> None:
        if frame.empty:
            stdout.print(f"no tracked {study} runs found")
            return
        shown = frame.assign(
            run_id=frame["run_id"].str[:8],
            study_run=frame["study_run"].str[:8],
            start=frame["start"].dt.strftime("%Y-%m-%d"),  # the date; --json: the time
        )
        print_columns(f"{study} runs (newest first)", shown, wanted, list(spec.short))
        stdout.print(f"figure: {out}")

    emit(result, as_json=as_json, human=human)


def print_columns(title: str, frame: Any, wanted: list[str] | None, default: list[str]) -> None:
    """The chosen columns as a table; ``--columns all`` as one block per row (name: value),
    which no terminal width cuts."""
    from tracking.compare import choose_columns

    names = choose_columns(frame, wanted, default)
    if wanted and [w.lower() for w in wanted] == ["all"]:
        stdout.print(title)
        for record in frame[names].to_dict("records"):
            stdout.print("")
            for name, value in record.items():
                if value == value:  # NaN: a column of another model (its parameters)
                    stdout.print(f"  {name}: {format_cell(value)}")
        return
    stdout.print(table(title, names, frame[names].values.tolist()))
    hidden = len(frame.columns) - len(names)
    if hidden > 0 and not wanted:
        stdout.print(f"({hidden} more columns: --columns all, or choose names from --json)")


def compare_models(
    study: str | None, last: int, as_json: bool, wanted: list[str] | None = None
) -> None:
    from tracking.compare import MODEL_LEAD, models_table

    frame = models_table(tuple(s.name for s in STUDIES if s.products), study, last=last)
    records = (
        frame.assign(created=frame["created"].astype(str)).to_dict("records") if len(frame) else []
    )
    result = {"study": study, "models": records}

    def human() -> None:
        if frame.empty:
            stdout.print("no registered greylab models found")
            return
        shown = frame.assign(
            run_id=frame["run_id"].astype(str).str[:8],
            **{"validation R^2": [_validation_r2(r) for r in frame.to_dict("records")]},
        )
        default = [c for c in MODEL_LEAD if c not in ("created", "data_hash")]
        print_columns("registered models (newest version first)", shown, wanted,
                      [*default, "validation R^2"])  # fmt: skip

    emit(result, as_json=as_json, human=human)


def _validation_r2(row: dict[Any, Any]) -> str:
    """`position 0.9956, velocity 0.9962`: the newest validation's R^2 per output."""
    found = [(k.removeprefix("validation.").removesuffix(".r2"), v) for k, v in row.items()
             if k.startswith("validation.") and k.endswith(".r2") and v == v]  # fmt: skip
    return ", ".join(f"{out} {value:.4f}" for out, value in found) or "-"


def demo(
    tests: Annotated[int, typer.Option(help="Press: calibration/validation tests per model.")] = 50,
    generations: Annotated[int, typer.Option(help="Drive: GP generations (short demo).")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """The main job on embedded defaults, tracked in the local MLflow store: the press study
    on the digital twin (truth M3), the overhead trolley crane's inverse simulation and a short
    drive-train structure search on the paper's reference recording."""
    from flows.drive.cli import print_drive_result
    from flows.drive.flow import DriveSearch, run_drive_search
    from flows.inverse.flow import InverseStudy, run_inverse_study
    from flows.press.cli import print_press_result
    from flows.press.flow import PressStudy, run_press_study

    with progress_bars(enabled=not as_json):
        stderr.print("1/3 press: model-uncertainty study on the digital twin (truth M3)")
        press = run_press_study(PressStudy(n_tests=tests))
        stderr.print("2/3 crane: inverse simulation of the overhead trolley crane")
        crane = run_inverse_study(InverseStudy(systems=["trolley_crane"]))
        stderr.print(
            f"3/3 drive: short structure search ({generations} generations; a demo, too short "
            "to find the structure reliably, and without the rival structures' fits, its "
            "costliest evidence: `greylab drive identify` runs 10 x 10 with them)"
        )
        drive = run_drive_search(DriveSearch(population=6, generations=generations, rivals=False))
    result = {"press": press.to_dict(), "inverse": crane.to_dict(), "drive": drive.to_dict()}

    def human() -> None:
        print_press_result(press)
        rows = [
            [r["system"], r["method"], r["dt"], r.get("max_constraint_violation"),
             r.get("tracking_error"), r.get("wall_time_s")]
            for r in crane.runs
        ]  # fmt: skip
        stdout.print(table(
            "Inverse simulation",
            ["system", "method", "dt", "max violation", "forward-check error", "wall time s"],
            rows,
        ))  # fmt: skip
        print_drive_result(drive)
        stdout.print(
            "\nWhere to look:\n"
            f"  MLflow UI: {press.tracking}\n"
            f"  press parent run {press.parent_run_id}, crane parent run "
            f"{crane.parent_run_id}, drive run {drive.run_id}\n"
            "  compare runs: greylab compare --study press (or drive, inverse)"
        )

    emit(result, as_json=as_json, human=human)

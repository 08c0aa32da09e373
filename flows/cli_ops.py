"""`greylab demo` and the operations commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

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
from flows.cli_settings import with_settings
from flows.ingest.settings import IngestSettings
from ingestion.layout import CAMPAIGN_FILE
from methods.errors import InputError
from runtime.settings import DATA_ROOT_DEFAULT, INBOX_DEFAULT, INBOX_DIR

MAX_LAST = 10_000  # `compare --last`: runs (or versions per name) read from MLflow


def register(app: typer.Typer) -> None:
    app.command()(demo)
    app.command()(compare)
    app.command()(serve)
    # `greylab ingest [options]` ingests (as before); `greylab ingest withdraw FILE|HASH`
    ingest_app = typer.Typer(add_completion=False, rich_markup_mode="markdown")
    ingest_app.callback(invoke_without_command=True)(ingest)
    ingest_app.command("withdraw")(withdraw)
    app.add_typer(ingest_app, name="ingest")


@with_settings(IngestSettings)
def ingest(
    settings: IngestSettings,
    inbox: Annotated[
        Path | None,
        typer.Option(
            help=f"Inbox folder; default $GREYLAB_INBOX, else {INBOX_DEFAULT} (with "
            f"--data-root: its {INBOX_DIR} folder)."
        ),
    ] = None,
    data_root: Annotated[
        Path | None,
        typer.Option(
            help=f"Dataset root (holds {CAMPAIGN_FILE}); default $GREYLAB_DATA_ROOT, else "
            f"{DATA_ROOT_DEFAULT}."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Ingest new lab files from the inbox: validate, append to the Parquet dataset, archive,
    quarantine bad files with an error report, never ingest the same content twice.

    Exit 1 if the data was stored but MLflow could not be reached (the summary says what was
    stored and what was not tracked). `greylab ingest withdraw FILE|HASH` takes an ingested
    file back out."""
    from typer._click.globals import get_current_context

    if get_current_context().invoked_subcommand is not None:
        return  # a subcommand (withdraw) runs instead of an ingestion
    from flows.ingest.flow import run_ingest

    # the folders are the CLI user's own (this process), never settings of the flow
    result = run_ingest(settings, inbox=inbox, data_root=data_root)
    emit(result, as_json=as_json, human=lambda: print_ingest_result(result))
    if (result.get("tracking") or {}).get("error"):
        if as_json:
            stderr.print(escape(result["tracking"]["message"]), soft_wrap=True, markup=True)
        raise typer.Exit(1)


def withdraw(
    reference: Annotated[
        str,
        typer.Argument(
            metavar="FILE|HASH",
            help="The ingested file: its content hash (at least 8 hex digits), the name it was "
            "ingested under, its archived original, or a copy of the file.",
        ),
    ],
    data_root: Annotated[
        Path | None,
        typer.Option(help=f"Dataset root; default $GREYLAB_DATA_ROOT, else {DATA_ROOT_DEFAULT}."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Take an ingested file back out of the dataset: a `withdrawn` ledger record, its dataset
    part removed, its archived original moved to `withdrawn/` (kept). Withdrawing again is
    harmless; a file that was never ingested is refused (exit 2) and nothing changes."""
    from ingestion.withdraw import withdraw as withdraw_file
    from runtime.settings import load_settings

    root = data_root.resolve() if data_root is not None else load_settings().data_root
    result = withdraw_file(root, reference).to_dict()
    emit(result, as_json=as_json,
         human=lambda: stdout.print(escape(result["message"]), soft_wrap=True, markup=True))  # fmt: skip


def print_ingest_result(result: dict[str, Any], console: Console | None = None) -> None:
    """Counts, then every file not ingested with its reason; file names and messages are
    file content, so rich markup in them is escaped."""
    console = console or stdout
    counts = result["counts"]
    console.print(table("Ingestion", list(counts), [list(counts.values())]))
    colour = {"quarantined": "red", "skipped": "yellow", "duplicate": "cyan"}
    for outcome in result["outcomes"]:
        status = outcome.get("status")
        if status in colour:
            message = str(outcome.get("message") or "")
            if status != "quarantined":
                message = message.splitlines()[0] if message else ""
            console.print(
                f"[{colour[status]}]{status}[/{colour[status]}] "
                f"{escape(str(outcome.get('name')))}: {escape(message)}",
                soft_wrap=True,
                markup=True,
            )
    console.print(
        f"stored: {result.get('rows', 0)} rows under {escape(str(result.get('data_root')))}",
        soft_wrap=True,
        markup=True,
    )
    tracking = result.get("tracking") or {}
    if tracking.get("message"):
        style = "red" if tracking.get("error") else "green"
        console.print(
            f"[{style}]{escape(tracking['message'])}[/{style}]", soft_wrap=True, markup=True
        )
    for study in result.get("studies") or []:
        console.print(
            escape(", ".join(f"{k}: {v}" for k, v in study.items())), soft_wrap=True, markup=True
        )


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
    study: Annotated[
        str | None, typer.Option(help="press, drive or inverse (with --models: press, drive).")
    ] = None,
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
    from tracking.compare import STUDIES, comparison_figure, runs_table

    wanted = split_list(columns) if columns else None
    if models:
        compare_models(study, last, as_json, wanted)
        return
    if study is None:
        raise InputError("give --study press|drive|inverse, or --models")
    if figure is not None:  # the user's file: never replaced silently
        check_output(figure, option="--figure", suffixes=FIGURE_SUFFIXES, overwrite=overwrite)
    frame = runs_table(study, experiment=experiment, last=last)
    out = None
    if not frame.empty:
        out = figure or load_settings().home / f"compare-{study}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        save_figure(comparison_figure(study, frame), out, overwrite=overwrite or figure is None)
    records = (
        frame.assign(start=frame["start"].astype(str)).to_dict("records") if len(frame) else []
    )
    result = {"study": study, "runs": records, "figure": str(out) if out else None}

    def human() -> None:
        if frame.empty:
            stdout.print(f"no tracked {study} runs found")
            return
        shown = frame.assign(run_id=frame["run_id"].str[:8])
        print_columns(f"{study} runs (newest first)", shown, wanted, STUDIES[study]["short"])
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

    frame = models_table(study, last=last)
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
            "to find the structure reliably: `greylab drive identify` runs 10 x 10)"
        )
        drive = run_drive_search(DriveSearch(population=6, generations=generations))
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

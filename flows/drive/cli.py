"""`greylab drive …`: simulate reference recordings, identify structure and parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli_common import (
    OVERWRITE_HELP,
    TABLE_SUFFIXES,
    JsonOpt,
    check_output,
    emit,
    parse_overrides,
    progress_bars,
    split_list,
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
    metrics_table,
    run_validation,
)
from flows.drive.settings import DriveFit, DriveSearch, check_search_recording
from methods.errors import InputError
from models.budget import check_samples
from tasks.drive.result import (
    DriveResult,
    gain_text,
    joint_text,
    move_texts,
    periodic_text,
    widened_text,
)

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Structure and parameter identification of drive trains (docs/methods.md §2).",
    no_args_is_help=True,
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="drive")


@app.command()
def simulate(
    out: Annotated[Path, typer.Option(help="Recording to write (.csv or .parquet).")],
    structure: Annotated[
        str, typer.Option(help="Comma-separated submodels (names or paper codes).")
    ] = "two_mass,coulomb,viscous,stribeck",
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="True parameter value, name=value.")
    ] = None,
    noise: Annotated[float, typer.Option(help="Velocity noise std [rad/s], absolute.")] = 0.0,
    seed: Annotated[int, typer.Option(help="Noise seed.")] = 0,
    overwrite: Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)] = False,
    as_json: JsonOpt = False,
) -> None:
    """Simulate the paper's reference excitation (jerk-limited reversing motion, 2 s, 1 kHz)
    on a structure; output the velocity of inertia 1."""
    from models.drivetrain import reference_recording

    check_output(out, option="--out", suffixes=TABLE_SUFFIXES, overwrite=overwrite)
    frame = reference_recording(
        split_list(structure), overrides=parse_overrides(set_), noise=noise, seed=seed
    )
    write_table(frame, out, overwrite=overwrite)
    result = {"out": str(out), "rows": len(frame), "structure": split_list(structure)}
    emit(result, as_json=as_json, human=lambda: stdout.print(
        f"wrote {len(frame)} samples of {structure} to {out}"))  # fmt: skip


@app.command()
@with_settings(DriveSearch)
def identify(
    study: DriveSearch,
    runner: Annotated[
        str,
        typer.Option(
            help="thread (worker threads in this process; the faster on one machine, docs/drive.md) "
            "or dask (a local cluster of processes, or the one at GREYLAB_DASK_ADDRESS)."
        ),
    ] = "thread",
    as_json: JsonOpt = False,
) -> None:
    """Search the structure (submodels) and parameters that explain a recording, with the
    evidence for the answer (intervals, residual tests, rival structures)."""
    _run(study, runner, as_json)


@app.command()
@with_settings(DriveFit)
def fit(
    study: DriveFit,
    runner: Annotated[
        str, typer.Option(help="thread (worker threads in this process) or dask.")
    ] = "thread",
    as_json: JsonOpt = False,
) -> None:
    """Identify the parameters of a structure you name (--structure 2,5,6,7, {2,5,6,7} or
    submodel names) on a recording, with the same evidence as a search (intervals, residual
    tests, its one-step rivals), registered like a search result (greylab compare)."""
    _run(study.study(), runner, as_json)


def _run(study: DriveSearch, runner: str, as_json: bool) -> None:
    """Check the recordings before any server starts, run the drive flow, render its result."""
    from flows.drive.flow import run_drive_search

    for given in (study.data, study.validation_data):  # fail fast, before any server starts
        if given is None:
            continue
        data = Path(given)
        if data.suffix.lower() == ".mat":
            if not data.exists():
                raise InputError(f"{data}: file not found")
        else:
            from schemas.drive import load_drive_recording

            frame = load_drive_recording(data)
            if given == study.data:  # length, excitation, scales: refused before any work
                check_search_recording(frame, study, str(data))
            else:
                check_samples(len(frame), str(data))
    with progress_bars(enabled=not as_json):
        result = run_drive_search(study, runner=runner)
    emit(result.to_dict(), as_json=as_json, human=lambda: print_drive_result(result))


@app.command()
def validate(
    data: Annotated[Path, typer.Option(help="Recording not used for identification.")],
    model: Annotated[
        str | None, typer.Option(help="Model URI: models:/drive-<campaign>/1, runs:/<id>/model.")
    ] = None,
    run: Annotated[
        str | None, typer.Option(help="Or the MLflow run id of a `drive identify`.")
    ] = None,
    emps_decimate: Annotated[
        int | None,
        typer.Option(help="EMPS .mat: keep every k-th sample; default: the model's sample time."),
    ] = None,
    experiment: ExperimentOpt = EXPERIMENT,
    track: TrackOpt = True,
    figure: FigureOpt = None,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Simulate an identified drive train open loop on a new recording (its torque, its first
    velocity and position): RMSE, fit, R^2 of velocity and position (docs/methods.md §4)."""
    if (model is None) == (run is None):
        raise InputError("give exactly one of --model URI or --run RUN_ID")
    if run is not None:
        from products.validation import model_uri_of_run
        from tracking.mlflow_tracker import Tracker

        model = model_uri_of_run(run, Tracker())
    assert model is not None
    run_validation("drive", model, data, emps_decimate=emps_decimate, experiment=experiment,
                   track=track, figure=figure, overwrite=overwrite,
                   as_json=as_json)  # fmt: skip


def print_drive_result(result: DriveResult) -> None:
    what = "Fitted structure" if result.fit else "Best structure"
    runs = "a fit, no search" if result.fit else f"{result.generations} generations"
    stdout.print(
        f"{what} {result.best_codes} = {', '.join(result.best_structure)} "
        f"(fitness {result.fitness:.4g}, RSS {result.rss:.4g}, {runs})"
    )
    if result.paper:
        s, ident = result.settings, result.settings.get("identification", {})
        stdout.print(
            f"the paper's search (--paper): population {s.get('population')} x "
            f"{s.get('generations')} generations, {s.get('selection')} selection, no elite, "
            f"every individual re-identified (up to {ident.get('max_nfev')} evaluations, "
            f"{ident.get('n_starts')} start), time-domain RSS"
        )
    if result.scales:
        values = ", ".join(f"{k} {v:.4g}" for k, v in result.scales["values"].items())
        stdout.print(
            f"centred on the recording's own scales (rigid-body fit, R^2 "
            f"{result.scales['r2']:.3f}): {values}"
        )
    if result.polish_moves:
        moves = " -> ".join(f"{{{codes}}}" for codes in result.polish_moves)
        stdout.print(f"the local search after the last generation moved the best to {moves}")
    for move in move_texts(result.selection):
        stdout.print(f"the evidence moved the answer {move}")
    if gain_text(result.friction_gain):
        stdout.print(gain_text(result.friction_gain))
    if result.widened:
        stdout.print(widened_text(result.widened))
    _print_parameters(result)
    if result.validation:
        stdout.print(metrics_table("Open-loop validation", result.validation))
    if result.model_uri:
        stderr.print(f"registered model {result.model_uri}")
    stderr.print(f"MLflow run {result.run_id}; look: {result.tracking}")


def _print_parameters(result: DriveResult) -> None:
    """The parameters (with standard errors and intervals when the evidence has them), the
    residual tests and the rival table."""
    ev = result.evidence
    if not ev:
        rows = [[k, v] for k, v in result.parameters.items()]
        stdout.print(table("Identified parameters", ["parameter", "value"], rows))
        return
    level = f"{100 * ev['level']:g} %"
    rows = [[k, p["value"], _num(p["stderr"]), _num(p["lower"]), _num(p["upper"]),
             joint_text(p), p["note"] or ""] for k, p in ev["parameters"].items()]  # fmt: skip
    stdout.print(table("Identified parameters", ["parameter", "value", "std. error",
                                                 f"{level} lower", f"{level} upper",
                                                 f"simultaneous {level}", "note"], rows))  # fmt: skip
    res = ev["residuals"]
    auto, cross = res["autocorrelation"], res["cross_correlation"]
    verdict = ("exact fit, not tested" if res["passed"] is None
               else "pass" if res["passed"] else "FAIL")  # fmt: skip
    stdout.print(
        f"residual tests ({100 * res['confidence']:g} %, N {res['n']}, lags <= "
        f"{auto['lags'][-1]}): {verdict}; autocorrelation worst {auto['worst']:.3g} at lag "
        f"{auto['worst_lag']}, cross-correlation with the input worst {cross['worst']:.3g} at "
        f"lag {cross['worst_lag']} (band +-{auto['family_band']:.3g}){periodic_text(res)}"
    )
    rivals = ev.get("rivals")
    if rivals:
        rows = [[",".join(map(str, r["codes"])), r["relation"], _num(r["rss"]), r["n_params"],
                 _num(r["bic"]), _num(r["p_value"]), r["note"][:40]] for r in rivals["rows"]]  # fmt: skip
        preferred = ",".join(map(str, rivals["preferred"]))
        stdout.print(table(f"Rivals on the {rivals['part']} (preferred {{{preferred}}})",
                           ["codes", "relation", "RSS", "d", "BIC", "F-test p", "note"], rows))  # fmt: skip
        stdout.print(f"rule: {rivals['rule']}")
    for note in ev.get("notes", []):
        stdout.print(f"note: {note}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"

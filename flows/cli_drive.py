"""`greylab drive …`: simulate reference recordings, identify structure and parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli_common import emit, parse_overrides, progress_bars, split_list, stderr, stdout, table
from methods.errors import InputError

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Structure and parameter identification of drive trains (docs/methods.md §2).",
    no_args_is_help=True,
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


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
    as_json: JsonOpt = False,
) -> None:
    """Simulate the paper's reference excitation (jerk-limited reversing motion, 2 s, 1 kHz)
    on a structure; output the velocity of inertia 1."""
    from flows.cli_press import _write_table
    from models.drivetrain import reference_recording

    frame = reference_recording(
        split_list(structure), overrides=parse_overrides(set_), noise=noise, seed=seed
    )
    _write_table(frame, out)
    result = {"out": str(out), "rows": len(frame), "structure": split_list(structure)}
    emit(result, as_json=as_json, human=lambda: stdout.print(
        f"wrote {len(frame)} samples of {structure} to {out}"))  # fmt: skip


@app.command()
def identify(
    data: Annotated[
        Path | None, typer.Option(help="Recording (.csv/.parquet) or EMPS .mat; omit = reference.")
    ] = None,
    population: Annotated[int, typer.Option(help="Individuals per generation.")] = 10,
    generations: Annotated[int, typer.Option(help="Generations.")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the search.")] = 0,
    workers: Annotated[int, typer.Option(help="Parallel workers.")] = 2,
    test_fraction: Annotated[float, typer.Option(help="Held-out tail for the fitness.")] = 0.0,
    nominal: Annotated[
        list[str] | None, typer.Option(help="Parameter nominal, name=value (bounds 50..200 %).")
    ] = None,
    noise_percent: Annotated[float, typer.Option(help="Reference only: noise, % of range.")] = 0.0,
    preset: Annotated[
        str | None, typer.Option(help="reference or emps; default: emps for a .mat file.")
    ] = None,
    runner: Annotated[str, typer.Option(help="thread or dask.")] = "dask",
    experiment: Annotated[str, typer.Option(help="MLflow experiment.")] = "drive-structure-search",
    cache: Annotated[
        bool,
        typer.Option(
            "--cache/--no-cache",
            help="Resume from the checkpoint of an identical search (same recording, settings "
            "and greylab code); --no-cache starts over.",
        ),
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Search the structure (submodels) and parameters that explain a recording."""
    from pydantic import ValidationError

    from flows.cli_press import _pydantic_message
    from flows.drive_flow import DriveSearch, run_drive_search

    if data is not None:
        if data.suffix.lower() == ".mat":
            if not data.exists():
                raise InputError(f"{data}: file not found")
        else:
            from schemas.drive import load_drive_recording

            load_drive_recording(data)  # fail fast, before any server starts
    try:
        study = DriveSearch(
            data=str(data.resolve()) if data else None,
            population=population,
            generations=generations,
            seed=seed,
            workers=workers,
            test_fraction=test_fraction,
            nominals=parse_overrides(nominal),
            noise_percent=noise_percent,
            preset=preset,
            experiment=experiment,
            resume=cache,
        )
    except ValidationError as exc:
        raise InputError(_pydantic_message(exc)) from None
    with progress_bars(enabled=not as_json):
        result = run_drive_search(study, runner=runner)
    emit(_public(result), as_json=as_json, human=lambda: print_drive_result(result))


def _public(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("best_structure", "best_codes", "parameters", "rss", "fitness", "generations",
            "run_id", "data_hash", "source", "resumed_from", "preset")  # fmt: skip
    return {k: result[k] for k in keys if k in result}


def print_drive_result(result: dict[str, Any]) -> None:
    stdout.print(
        f"Best structure {result['best_codes']} = {', '.join(result['best_structure'])} "
        f"(fitness {result['fitness']:.4g}, RSS {result['rss']:.4g}, "
        f"{result['generations']} generations)"
    )
    rows = [[k, v] for k, v in result["parameters"].items()]
    stdout.print(table("Identified parameters", ["parameter", "value"], rows))
    stderr.print(f"MLflow run {result['run_id']}; look: {result['tracking']}")

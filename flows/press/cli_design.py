"""`greylab press design`: optimal sensor selection for a model, with or without measurements,
from a handful of sensors to a candidate sheet of any size (docs/methods.md §1, sensor design).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli_common import (
    FIGURE_SUFFIXES,
    OVERWRITE_HELP,
    allow_typed_models,
    check_output,
    emit,
    frame_table,
    means_all,
    save_figure,
    split_lists,
    stderr,
    stdout,
)
from methods.errors import InputError

ModelOpt = Annotated[
    list[str],
    typer.Option(
        "--model",
        "--models",
        help="Model(s): M1/M2/M3 or package.module:attr (a file in the current folder or an "
        "installed package); repeat or comma-separate.",
    ),
]
SHOWN = 12  # rows of the table printed (the JSON has every evaluated subset)


def register(app: typer.Typer) -> None:
    app.command()(design)


def design(
    data: Annotated[
        Path | None,
        typer.Option(
            help="Measurement table (.csv/.parquet); none: the nominal parameters on "
            "the model's default_forces, sigma from --sheet or the model."
        ),
    ] = None,
    sheet: Annotated[
        Path | None,
        typer.Option(
            help="Candidate sensors: sensor,sigma_um[,cost] (any number of rows); "
            "default: every model sensor."
        ),
    ] = None,
    sensors: Annotated[
        str, typer.Option(help="Keep exactly this many sensors, or all (0) = any number.")
    ] = "all",
    max_sensors: Annotated[int | None, typer.Option(help="Keep at most this many.")] = None,
    budget: Annotated[
        float | None, typer.Option(help="Total cost at most this (needs the sheet's cost).")
    ] = None,
    criterion: Annotated[str, typer.Option(help="A, D or E.")] = "E",
    model: ModelOpt = ["M3"],  # noqa: B006 - typer reads the default, never mutates it
    design_model: Annotated[
        str | None,
        typer.Option(help="Model the design uses; default: the one with the most parameters."),
    ] = None,
    refit: Annotated[
        bool, typer.Option(help="Second-order terms from a fit on each subset's own data.")
    ] = False,
    gap: Annotated[float, typer.Option(help="Proven relative gap of branch-and-bound.")] = 0.01,
    time_limit: Annotated[float, typer.Option(help="Seconds for branch-and-bound.")] = 60.0,
    figure: Annotated[
        Path | None,
        typer.Option(help="Save the criterion / Pareto figure here (.png, .pdf, .svg)."),
    ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable JSON on stdout.")
    ] = False,
) -> None:
    """Optimal sensor selection (A/D/E criteria): enumeration where cheap, branch-and-bound
    with a proven gap beyond; budgets exactly n, at most n, cost <= B."""
    import methods
    from flows.press.flow import choose_design_model
    from models.registry import resolve_model

    models = split_lists(model)
    allow_typed_models(models + ([design_model] if design_model else []))
    if figure is not None:  # before any work
        check_output(figure, option="--figure", suffixes=FIGURE_SUFFIXES, overwrite=overwrite)
    chosen, why = choose_design_model(models, design_model)
    table, sigma, costs = _inputs(data, sheet)
    model_object = resolve_model(chosen)
    result = methods.sensor_design(
        model_object, table, n_sensors=_sensor_count(sensors), criterion=criterion.upper(),
        sigma=sigma, max_sensors=max_sensors, costs=costs, budget=budget,
        candidates=list(sigma) if sheet is not None and sigma else None, refit=refit,
        gap_tol=gap, time_limit=time_limit,
    )  # fmt: skip
    if figure is not None:
        from methods.press.plots import design_curve_figure

        save_figure(design_curve_figure(result), figure, overwrite=overwrite)
    out = {**result.to_dict(), "model": chosen, "model_chosen_by": why}
    emit(out, as_json=as_json, human=lambda: _print(result, chosen, why))


def _inputs(
    data: Path | None, sheet: Path | None
) -> tuple[Any, dict[str, float] | None, dict[str, float] | None]:
    """The corrected table (or None), sigma per sensor and costs (or None) from the sheet."""
    import methods
    from schemas.press import load_candidate_sheet, load_press_table

    sigma, costs = load_candidate_sheet(sheet) if sheet is not None else (None, None)
    if data is None:
        return None, sigma, costs
    frame = load_press_table(data)
    measured = set(frame["sensor"].unique())
    if sigma is not None:
        unmeasured = sorted(set(sigma) - measured)
        if unmeasured:
            raise InputError(f"{sheet}: candidate sensor(s) {unmeasured[:10]} have no "
                             f"measurements in {data}")  # fmt: skip
    return methods.correct_to_setpoints(frame), sigma, costs


def _sensor_count(text: str) -> int | None:
    """``--sensors``: a positive number, or ``all`` / ``0`` for any number."""
    if means_all(text):
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"--sensors: expected a number or 'all', got {text[:40]!r}") from None


def _print(result: Any, model: str, why: str) -> None:
    search = result.search
    title = f"Sensor design ({result.criterion}-optimal, model {model}: {why})"
    shown = result.table.sort_values(result.criterion, kind="stable").head(SHOWN)
    stdout.print(frame_table(title, shown if len(result.table) > SHOWN else result.table))
    if len(result.table) > SHOWN:
        stdout.print(f"({len(result.table) - SHOWN} more subsets: --json)")
    how = f"{search['method']} ({search['budget']}"
    if search["method"] == "branch-and-bound":
        proven = "proven" if search["proven"] else "NOT proven"
        how += (f"; {search['nodes']} nodes, gap {100 * search['gap']:.2f} % {proven}, "
                f"{search['seconds']:.1f} s")  # fmt: skip
    stdout.print(f"{how}; second-order terms {search['second_order']})")
    if result.best is None:
        stderr.print("no identifiable subset within the budget")
        return
    stdout.print(f"best: {result.best['code']} = {result.best_sensors}")
    runners = result.runners_up(3)
    if len(runners):
        values = ", ".join(f"{r['sensors']} {r[result.criterion]:.4g}"
                           for r in runners.to_dict("records"))  # fmt: skip
        stdout.print(f"runners-up ({result.criterion}): {values}")

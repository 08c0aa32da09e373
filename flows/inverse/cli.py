"""`greylab inverse …`: feedforward controls of underactuated systems (docs/methods.md §3).

    greylab inverse list [SYSTEM...] [--json]
    greylab inverse run SYSTEM [--demand FILE.yaml] [--method euler|bdf2|radau] [--dt 1e-3]
        [--t-end T] [--set name=value ...] [--no-check] [--experiment NAME]
        [--out FILE.parquet] [--json] [--no-track]

The options of `run` are the fields of `InverseStudy` (flows/inverse/settings.py, through
`flows.cli_settings.with_settings`) plus its own: SYSTEM, `--demand`, `--out`, `--track`,
`--json`. `run` goes through the `inverse-simulation` flow (tracked in MLflow) unless
`--no-track`. SYSTEM may be a lab's own system, `module:Class` or `file.py:Class` of the
current folder (docs/models.md): the references typed here join the run's allow-list.
Bad input — unknown system or parameter, a demand file that is not YAML or does not fit the
system, an infeasible or too rough demand, a singular partition, a Newton failure — is an
`InputError`: one message naming the file/field/time, exit code 2, no traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from flows.cli_common import (
    OVERWRITE_HELP,
    TABLE_SUFFIXES,
    JsonOpt,
    check_output,
    clip,
    emit,
    progress_bars,
    safe,
    stderr,
    stdout,
    table,
    write_table,
)
from flows.cli_settings import settings_message, with_settings
from flows.inverse.settings import InverseStudy
from methods.errors import InputError

if TYPE_CHECKING:
    from models.underactuated import System

app = typer.Typer(
    rich_markup_mode="markdown",
    help="Inverse dynamics of underactuated systems in partly specified motion (docs/methods.md §3).",
    no_args_is_help=True,
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="inverse")


def allow_typed_systems(references: list[str]) -> list[str]:
    """The CLI user's own systems (docs/trust.md) join the run's allow-list, and a file
    of the current folder becomes importable as ``file:attr`` (``file.py:attr``), for this
    process and the workers it starts; only then, appended last (never shadows an installed
    module). Returns the normalised names."""
    from models.underactuated import SYSTEMS
    from models.underactuated.plugins import allow_systems, normalize_reference

    names = [normalize_reference(r) for r in references]
    own = [r for r in names if r not in SYSTEMS and ":" in r]
    if own:
        allow_systems(own)
        here = os.getcwd()
        if here not in sys.path:
            sys.path.append(here)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if here not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([*paths, here])
    return names


def system_catalogue(names: list[str] | None = None) -> list[dict[str, Any]]:
    """Every registered system (or the ones named, lab systems included): description,
    parameters (value, unit, description), names of coordinates, velocities, controls and
    demanded outputs, default demand, exact solution. Without names, the lab systems this
    environment allows (entry points `greylab.systems`, GREYLAB_ALLOWED_SYSTEMS) follow the
    built-ins; one that fails to load is listed with its `error`."""
    from models.underactuated import SYSTEMS, get_system, list_systems
    from models.underactuated.plugins import allowed_systems

    if names:
        specs: list[Any] = [(n, lambda n=n: get_system(n)) for n in names]
    else:
        specs = [(spec.name, spec) for spec in list_systems()]
        specs += [(n, lambda n=n: get_system(n)) for n in sorted(allowed_systems() - set(SYSTEMS))]
    out = []
    for name, make in specs:
        try:
            built = make()
        except InputError as exc:
            if names:
                raise
            out.append({"name": name, "error": str(exc)})
            continue
        info = built.to_dict()
        info["parameters"] = [
            {"name": p.name, "value": p.value, "unit": p.unit, "description": p.description}
            for p in built.parameters
        ]
        info["demand_order"] = built.problem.demand_order
        info["default_demand"] = built.default_demand
        out.append(info)
    return out


@app.command("list")
def list_command(
    systems_named: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[SYSTEM]...",
            help="Only these systems; a lab's own as module:Class or file.py:Class "
            "(docs/models.md).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Systems with their parameters (defaults, units), outputs, controls, default demand."""
    systems = system_catalogue(allow_typed_systems(systems_named or []) or None)

    def human() -> None:
        for s in systems:
            if "error" in s:
                stderr.print(f"{safe(s['name'])}: cannot be loaded: {safe(s['error'])}")
                continue
            stdout.print(f"[bold]{safe(s['name'])}[/bold]: {safe(s['description'])}", markup=True)
            stdout.print(
                f"  outputs (demand): {', '.join(s['outputs'])}; controls: "
                f"{', '.join(s['controls'])}; coordinates: {', '.join(s['coordinates'])}; "
                f"exact solution: {'yes' if s['has_exact_solution'] else 'no'}; "
                f"demand order {s['demand_order']}; default horizon "
                f"{(s['default_demand'] or {}).get('t_end', '?')} s"
            )
            params = [[p["name"], p["value"], p["unit"], p["description"]] for p in s["parameters"]]
            stdout.print(table("", ["parameter", "default", "unit", "meaning"], params))
        stdout.print("override with --set name=value; demand file format: docs/inverse.md")

    emit({"systems": systems}, as_json=as_json, human=human)


MAX_DEMAND_BYTES = 256 * 1024  # a demand file is a few hundred bytes; refuse larger ones


def _yaml_loader():  # -> a SafeLoader subclass without anchors and aliases
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        """`yaml.SafeLoader` that refuses anchors and aliases (`&a`, `*a`): a demand never
        needs them, and nested aliases expand exponentially (a "billion laughs" bomb of a
        few hundred bytes hangs the loader or yields a huge document)."""

        def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise yaml.composer.ComposerError(
                    None, None, "anchors and aliases (&name, *name) are not allowed in a "
                    "demand file", event.start_mark,
                )  # fmt: skip
            return super().compose_node(parent, index)

    return NoAliasLoader


def load_demand_file(path: Path) -> dict[str, Any]:
    """Read a demand file (YAML; JSON is YAML too). Errors name the file (and line).

    At most `MAX_DEMAND_BYTES`; anchors and aliases are refused (no alias bombs)."""
    import yaml

    if not path.is_file():
        raise InputError(f"--demand {path}: no such file")
    try:
        size = path.stat().st_size
        if size > MAX_DEMAND_BYTES:
            raise InputError(
                f"--demand {path}: {size:,} bytes is larger than a demand file may be "
                f"({MAX_DEMAND_BYTES:,} bytes)"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--demand {path}: cannot read the file ({clip(str(exc), 200)})") from None
    try:
        spec = yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"--demand {path}: not valid YAML{where}: {clip(problem, 300)}") from None
    if spec is None:
        raise InputError(f"--demand {path}: the file is empty")
    if not isinstance(spec, dict):
        raise InputError(
            f"--demand {path}: expected a mapping with 'outputs' (and 't_end'), "
            f"got {type(spec).__name__}; see docs/inverse.md"
        )
    return spec


@app.command()
@with_settings(InverseStudy)
def run(
    study: InverseStudy,
    system: Annotated[
        str,
        typer.Argument(
            help="System name (see `greylab inverse list`), or your own as module:Class or "
            "file.py:Class from the current folder (docs/models.md)."
        ),
    ],
    demand: Annotated[
        Path | None, typer.Option(help="Demand file (YAML, docs/inverse.md); default demand.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write t_s, coordinates, velocities, controls (.parquet).")
    ] = None,
    track: Annotated[
        bool, typer.Option("--track/--no-track", help="Run through the flow, tracked in MLflow.")
    ] = True,
    overwrite: Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)] = False,
    as_json: JsonOpt = False,
) -> None:
    """Compute the motion and feedforward controls of SYSTEM for a demand; verify them."""
    from models.underactuated.study import check_study

    if out is not None:  # before any work: suffix, folder, no silent replacement
        check_output(out, option="--out", suffixes=TABLE_SUFFIXES, overwrite=overwrite)
    spec = load_demand_file(demand) if demand is not None else None
    system = allow_typed_systems([system])[0]
    study = _for_system(study, system, spec)
    source = f"--demand {demand}" if demand is not None else "default demand"
    built = check_study(  # before any Prefect server starts
        study.systems, study.overrides, study.demand, study.t_end, study.step_sizes(),
        source=source,
    )  # fmt: skip
    if track:
        summary, frame = _run_tracked(study, as_json)
    else:
        summary, frame = _run_untracked(study, built[system])
    if out is not None:
        summary["out"] = str(write_table(frame, out, overwrite=overwrite))
    summary["columns"] = list(frame.columns)
    emit(summary, as_json=as_json, human=lambda: print_inverse_result(summary))


def _for_system(study: InverseStudy, system: str, demand: dict[str, Any] | None) -> InverseStudy:
    """The settings of the options with the SYSTEM argument and the demand file's content
    (validated again: the demand may give the horizon that the step limit needs)."""
    try:
        return InverseStudy.model_validate(
            {**study.model_dump(), "systems": [system], "demand": demand}
        )
    except ValidationError as exc:
        raise InputError(settings_message(exc, InverseStudy)) from None


def _run_untracked(study: InverseStudy, built: System) -> tuple[dict[str, Any], Any]:
    """One simulation in this process, nothing recorded; the system checked is the one solved."""
    from methods.dae import InverseProblemError
    from models.underactuated.study import overrides_for, solve_system

    applied = overrides_for(built.name, study.overrides, study.systems)
    outcome = solve_system(
        built, study.demand, study.method, study.dt, study.t_end, study.forward_check,
        overrides=applied,
    )  # fmt: skip
    if outcome.result is None:
        raise InverseProblemError(f"{outcome.label}: {outcome.error}", time=outcome.error_time)
    return outcome.to_dict(), outcome.result.table


def _run_tracked(study: InverseStudy, as_json: bool) -> tuple[dict[str, Any], Any]:
    import pandas as pd

    from flows.inverse.flow import run_inverse_study

    with progress_bars(enabled=not as_json):
        result = run_inverse_study(study)
    summary = dict(result.runs[0])
    summary |= {"parent_run_id": result.parent_run_id, "tracking": result.tracking}
    return summary, pd.read_parquet(summary["table_path"])


def print_inverse_result(s: dict[str, Any]) -> None:
    res = s["result"]
    rank = s["rank_info"]
    newton = s["newton_iterations"]
    rows = [
        ["horizon", f"{res['t_start']:g} .. {res['t_end']:g} s ({res['n_steps']} steps)"],
        ["rank([C;B])", f"{rank['rank_CB']} (n = {rank['n']}, {'ok' if rank['ok'] else 'FAILS'})"],
        ["p = rank(C M^-1 B^T)", f"{rank['p']} (2m - n = {rank['p_expected']})"],
        ["max servo-constraint violation", s["max_constraint_violation"]],
    ]
    fwd = s.get("forward_check")
    if fwd is not None:
        per = ", ".join(f"{k} {v:.3g}" for k, v in fwd["max_tracking_error"].items())
        rows.append(["forward-check tracking error", f"{fwd['max_error']:.3g} ({per})"])
    if s.get("error_vs_exact") is not None:
        rows.append(["max error vs exact solution", s["error_vs_exact"]])
    rows += [
        ["Newton iterations", f"total {newton['total']:.0f}, max/step {newton['max']:.0f}"],
        ["wall time", f"{s['wall_time_s']:.3f} s (+ compile {s['compile_time_s']:.3f} s)"],
    ]
    for name, (lo, hi) in res["controls_range"].items():
        rows.append([f"control {name}", f"{lo:.6g} .. {hi:.6g}"])
    stdout.print(table(f"{s['system']}: {s['method']}, dt = {s['dt']:g} s", ["", ""], rows))
    for w in s.get("warnings", []):
        stderr.print(f"warning: {w}")
    if s.get("out"):
        stdout.print(f"table ({', '.join(s['columns'])}) written to {s['out']}")
    if s.get("parent_run_id"):
        stderr.print(
            f"MLflow run {s['run_id']} (parent {s['parent_run_id']}); look: {s['tracking']}"
        )

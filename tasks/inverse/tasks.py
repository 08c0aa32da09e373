"""The Prefect task of the inverse study: one DAE simulation per task, thin over the core
(`models.underactuated.study`: the study's checks and `solve_system`, which `greylab inverse
run --no-track` calls without Prefect).

Inputs are small and picklable (system name, parameter overrides, the demand as a plain dict,
method, step size), so the same task runs in threads, processes or on Dask workers. Failures
that are properties of the input are returned in the outcome, not raised or retried; nothing
is cached (the recorded wall times must be this run's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prefect import task

from methods.errors import InputError
from models.underactuated import get_system
from models.underactuated.study import InverseOutcome, fresh_system, overrides_for, solve_system
from runtime.settings import load_settings


def tables_dir() -> Path:
    """Where the study's trajectories are stored: `$GREYLAB_DATA_ROOT/inverse/tables`."""
    return load_settings().data_root / "inverse" / "tables"


@task(
    name="inverse-simulation", task_run_name="solve {system} {method} dt={dt}", retries=0,
    persist_result=False,
)  # fmt: skip
def simulate(
    system: str,
    overrides: Mapping[str, float],
    demand: Mapping[str, Any] | None,
    method: str,
    dt: float,
    t_end: float | None = None,
    check: bool = True,
    systems: Sequence[str] | None = None,
    store: bool = True,
) -> InverseOutcome:
    """One simulation of a study: build `system` here (a task's own CasADi problem: compiled
    schemes are cached on it and not shared between threads or workers), then `solve_system`.

    `systems`: every system of the study (to resolve `system.name` overrides). Never raises
    for bad input: see the module docstring.
    """
    try:
        applied = overrides_for(system, overrides, list(systems or [system]))
        fresh_system(system)
        built = get_system(system, applied)
    except InputError as exc:
        return InverseOutcome(
            system=system, method=str(method), dt=float(dt), parameters={},
            overrides=dict(overrides), system_info={}, error=str(exc),
            error_type=type(exc).__name__,
        )  # fmt: skip
    return solve_system(built, demand, method, dt, t_end, check, overrides=applied,
                        tables=tables_dir() if store else None)  # fmt: skip

"""The inverse study's core, without Prefect: the one input check of a study (command line and
flow: systems, parameters, the demand against each system, horizon and step limit;
`check_study`) and one simulation (`solve_system`: solve, check by forward simulation, compare
with the exact (flat) solution where one exists). The Prefect task `models.underactuated.study.tasks.simulate`
builds its own system per task (CasADi problems cache compiled schemes on themselves, so they
are not shared between threads) and calls `solve_system`; `greylab inverse run --no-track`
calls it directly.

Failures: a diverged Newton iteration, a singular partition, an infeasible or too rough demand
are properties of the input, not transient faults: `solve_system` does not raise for them; it
returns an `InverseOutcome` with `error` (the core's message) and `error_time` (s).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from methods.dae import Demand, InverseResult, forward_check, solve_inverse
from methods.dae.forward import ForwardCheck
from methods.errors import InputError
from models import limits
from models.plugin_code import fresh_model_module, model_fingerprint
from models.underactuated import SYSTEMS, System, exact_solution, get_system
from models.underactuated.plugins import (
    check_system_reference,
    normalize_reference,
    source_reference,
)
from schemas.storage import content_hash, store_table

__all__ = [
    "InverseOutcome",
    "check_study",
    "overrides_for",
    "solve_system",
]


@dataclass(frozen=True)
class InverseOutcome:
    """One simulation (system x step size): the core's result or the reason it failed.

    Fields: `system`, `method`, `dt` (s), `parameters` (every system parameter after the
    overrides, `{name: value}`), `overrides` (only the changed ones), `system_info`
    (`System.to_dict()`), `result` (`InverseResult` or None), `forward` (`ForwardCheck` or
    None), `error_vs_exact` (`{column: max |exact - computed|}` in SI units, or None when the
    system has no exact solution), `table_path` (the trajectory as content-addressed Parquet),
    `error` / `error_type` / `error_time` (s) when the solve failed, `wall_time_s` of the task.
    """

    system: str
    method: str
    dt: float
    parameters: dict[str, float]
    overrides: dict[str, float]
    system_info: dict[str, Any]
    result: InverseResult | None = field(default=None, repr=False)
    forward: ForwardCheck | None = None
    error_vs_exact: dict[str, float] | None = None
    table_path: str | None = None
    error: str | None = None
    error_type: str | None = None
    error_time: float | None = None
    task_time_s: float = 0.0
    #: a lab's own system: `{"reference", "name" (its own), "source" (hash of its code)}`
    plugin: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def label(self) -> str:
        return f"{self.system} ({self.method}, dt = {self.dt:g} s)"

    @property
    def tracking_error(self) -> float | None:
        return None if self.forward is None else float(self.forward.max_error)

    @property
    def max_error_vs_exact(self) -> float | None:
        return None if not self.error_vs_exact else float(max(self.error_vs_exact.values()))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: identity, headline numbers, the core's `to_dict()` results."""
        out: dict[str, Any] = {
            "system": self.system,
            "method": self.method,
            "dt": float(self.dt),
            "status": "ok" if self.ok else "failed",
            "parameters": dict(self.parameters),
            "overrides": dict(self.overrides),
            "table_path": self.table_path,
            "task_time_s": float(self.task_time_s),
        }
        if self.plugin is not None:
            out["plugin"] = dict(self.plugin)
        r = self.result
        if r is None:
            out |= {"error": self.error, "error_type": self.error_type, "time": self.error_time}
            return out
        out |= {
            "max_constraint_violation": float(r.max_constraint_violation),
            "tracking_error": self.tracking_error,
            "error_vs_exact": self.max_error_vs_exact,
            "wall_time_s": float(r.wall_time_s),
            "compile_time_s": float(r.compile_time_s),
            "newton_iterations": {k: float(v) for k, v in r.newton_iterations.items()},
            "rank_info": r.rank_info.to_dict(),
            "warnings": list(r.warnings),
            "result": r.to_dict(),
            "forward_check": None if self.forward is None else self.forward.to_dict(),
            "error_vs_exact_by_column": self.error_vs_exact,
        }
        return out


# -- the one check of a study, shared by the command line and the flow (before any computing) --
def overrides_for(system: str, overrides: Mapping[str, float], systems: Sequence[str]) -> dict:
    """The overrides that apply to `system`.

    `name=value` applies to every selected system (so it must be a parameter of each);
    `system.name=value` applies to that system only.
    """
    out: dict[str, float] = {}
    for key, value in overrides.items():
        target, dot, name = key.rpartition(".")
        if not dot:
            out[key] = value
            continue
        target = normalize_reference(target)  # file.py:Class.m names file:Class
        if target not in systems:
            raise InputError(
                f"override {key!r}: {target!r} is not one of the selected systems {list(systems)}"
            )
        if target == system:
            out[name] = value
    return out


def fresh_system(system: str) -> None:
    """Re-import a lab system's module if its source changed in this process (a long-lived
    worker, a notebook), so what runs is the code whose hash is recorded."""
    reference = source_reference(system) if system not in SYSTEMS else None
    if reference is not None:
        try:
            fresh_model_module(reference)
        except Exception as exc:  # the edited module no longer imports
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise InputError(
                f"system plugin {system!r}: re-importing its edited module failed: "
                f"{type(exc).__name__}: {first}"
            ) from None


def plugin_info(built: System) -> dict[str, Any] | None:
    """A lab system's reference, own name and code hash (its module's source, or every *.py of
    its top-level package; `tasks.cache.model_fingerprint`, as for press plugins)."""
    if built.reference is None:
        return None
    reference = source_reference(built.reference) or built.reference
    fingerprint = model_fingerprint(reference) or ""
    return {"reference": reference, "name": built.user_name,
            "source": fingerprint.partition("@")[2] or None}  # fmt: skip


def _build(system: str, overrides: Mapping[str, float], systems: Sequence[str]) -> System:
    fresh_system(system)
    return get_system(system, overrides_for(system, overrides, systems))


def check_study(
    systems: Sequence[str],
    overrides: Mapping[str, float],
    demand: Mapping[str, Any] | None,
    t_end: float | None,
    step_sizes: Sequence[float] = (),
    *,
    source: str | None = None,
) -> dict[str, System]:
    """Fail fast on unknown systems/parameters, demands that do not fit a system, a missing
    horizon and more steps than `GREYLAB_MAX_INVERSE_STEPS` (horizon from `t_end` or the
    demand, the system's default demand included; the smallest of `step_sizes`).

    Raises `InputError` naming the system, parameter or demand field; demand errors start with
    `source` (e.g. the demand file) or the system's name. Returns the built systems by name.
    """
    if not systems:
        raise InputError("systems: select at least one system")
    dupes = sorted({s for s in systems if list(systems).count(s) > 1})
    if dupes:
        raise InputError(f"systems: {dupes} selected more than once")
    for name in systems:  # the worker's allow-list, before anything is imported
        check_system_reference(name, frozenset(SYSTEMS))
    built = {}
    for name in systems:
        built[name] = _build(name, overrides, systems)
        where = source or name
        try:
            parsed = built[name].demand(demand)  # names checked against the system's outputs
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        horizon = t_end if t_end is not None else parsed.t_end
        if horizon is None:
            raise InputError(f"{where}: no t_end in the demand; give one there or with --t-end")
        if step_sizes:
            limits.inverse_steps(parsed.t_start, horizon, min(step_sizes))
    return built


def solve_system(
    built: System,
    demand: Mapping[str, Any] | None,
    method: str,
    dt: float,
    t_end: float | None = None,
    check: bool = True,
    *,
    overrides: Mapping[str, float] | None = None,
    tables: Path | None = None,
) -> InverseOutcome:
    """Solve the inverse dynamics of a built system at one step size (plain Python: the task
    `simulate` and `greylab inverse run --no-track` both call it).

    `demand`: the documented dict (None = the system's default). `check`: forward check by
    re-simulation with the computed controls. `overrides`: the ones applied to `built` (for
    the record). `tables`: a folder to store the trajectory table in, as content-addressed
    Parquet (its path travels instead of the table); None stores nothing.
    Never raises for bad input: see the module docstring.
    """
    start = time.perf_counter()
    ident: dict[str, Any] = {
        "system": built.name,
        "method": str(method),
        "dt": float(dt),
        "parameters": built.params,
        "overrides": dict(overrides or {}),
        "system_info": built.to_dict(),
        "plugin": plugin_info(built),
    }
    try:
        dem = built.demand(demand)
        with warnings.catch_warnings():
            # DemandSmoothnessWarning is kept in result.warnings (and recorded)
            warnings.simplefilter("ignore")
            result = solve_inverse(
                built.problem, dem, method=method, dt=dt, t_end=t_end,
                strict_rank=built.strict_rank,
            )  # fmt: skip
        forward = forward_check(built, result) if check else None
        exact = _error_vs_exact(built, dem, result)
    except InputError as exc:
        return InverseOutcome(
            **ident, error=str(exc), error_type=type(exc).__name__,
            error_time=getattr(exc, "time", None), task_time_s=time.perf_counter() - start,
        )  # fmt: skip
    path = None
    if tables is not None:
        path = str(store_table(result.table, tables, content_hash(result.table)))
    return InverseOutcome(
        **ident, result=result, forward=forward, error_vs_exact=exact, table_path=path,
        task_time_s=time.perf_counter() - start,
    )  # fmt: skip


def _error_vs_exact(built: System, demand: Demand, result: InverseResult) -> dict | None:
    """`{column: max |exact - computed|}` where the system has an exact solution."""
    if built.exact is None:
        return None
    t = result.table["t_s"].to_numpy()
    ref = exact_solution(built, demand, t)
    return {
        c: float(np.max(np.abs(ref[c].to_numpy() - result.table[c].to_numpy())))
        for c in ref.columns
        if c != "t_s" and c in result.table
    }

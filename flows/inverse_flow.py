"""Flow `inverse-simulation`: feedforward controls of underactuated systems in partly
specified motion (docs/methods.md §3), several systems x step sizes in parallel, all tracked.

check settings (names, parameters, demand) -> one task per system x step size (solve, forward
check, error vs exact) -> one MLflow child run per simulation under a parent run -> summary.
A failed simulation (infeasible demand, singular partition, Newton failure) is recorded as a
FAILED child run with its message and time; by default the flow then raises an `InputError`
naming every failure (after the others are recorded), so the Prefect run shows Failed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from prefect import flow
from prefect.futures import as_completed
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flows.progress import Progress
from flows.runners import RunnerKind, run_flow
from methods.dae import InverseProblemError
from methods.errors import InputError
from tasks import inverse as inverse_tasks
from tasks import limits
from tasks.inverse_records import InverseRecorder
from tasks.tracking import validate_experiment_name


class Method(StrEnum):
    euler = "euler"
    bdf2 = "bdf2"
    radau = "radau"


class InverseStudy(BaseModel):
    """Settings of one inverse simulation study (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid")

    systems: list[str] = Field(
        default_factory=lambda: ["planar_crane"],
        min_length=1,
        description="Systems (see `greylab inverse list`), simulated in parallel",
    )
    method: Method = Field(Method.euler, description="euler (the paper), bdf2 or radau")
    dt: float = Field(1e-3, gt=0, le=1.0, description="Step size [s]")
    dts: list[float] | None = Field(
        None, description="Several step sizes [s], each simulated in parallel; replaces dt"
    )
    t_end: float | None = Field(None, gt=0, description="End time [s]; empty = the demand's")
    overrides: dict[str, float] = Field(
        default_factory=dict,
        description="Parameter overrides: name (every system) or system.name (one system)",
    )
    demand: dict[str, Any] | None = Field(
        None, description="Demand (docs/inverse.md format); empty = each system's default"
    )
    forward_check: bool = Field(True, description="Re-simulate with the computed controls")
    raise_on_failure: bool = Field(
        True, description="Fail the flow run (after recording) when any simulation failed"
    )
    experiment: str = "inverse-simulation"

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)

    @model_validator(mode="after")
    def _limits(self) -> InverseStudy:
        """Steps per simulation ((t_end - t_start) / dt, horizon from t_end or the demand)
        and simulations per study within the machine's limits (`tasks.limits`)."""
        sizes = self.step_sizes()
        limits.check(
            f"simulations (systems x step sizes = {len(self.systems)} x {len(sizes)})",
            len(self.systems) * len(sizes),
            "GREYLAB_MAX_INVERSE_RUNS",
        )
        horizon = self.horizon()
        if horizon is not None:
            limits.inverse_steps(horizon[0], horizon[1], min(sizes))
        return self

    def horizon(self) -> tuple[float, float] | None:
        """(t_start, t_end) as far as the settings give it (None: the systems' defaults)."""
        demand = self.demand or {}
        t_start = demand.get("t_start", 0.0)
        t_end = self.t_end if self.t_end is not None else demand.get("t_end")
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (t_start, t_end)
        ):
            return None
        return float(t_start), float(t_end)  # type: ignore[arg-type]

    def step_sizes(self) -> list[float]:
        sizes = self.dts or [self.dt]
        bad = [h for h in sizes if not 0 < h <= 1.0]
        if bad:
            raise InputError(f"dts: step sizes must be in (0, 1] s, got {bad}")
        return list(dict.fromkeys(float(h) for h in sizes))


@flow(name="inverse-simulation", log_prints=True)
def inverse_simulation(study: InverseStudy | None = None) -> dict[str, Any]:
    """Run every system x step size of `study`; returns plain JSON (see `_run`)."""
    study = study or InverseStudy()
    inverse_tasks.check_study(study.systems, study.overrides, study.demand, study.t_end)
    recorder = InverseRecorder(study.experiment)
    with recorder.session(study.model_dump(mode="json")) as parent:
        result = _run(study, recorder)
        failed = [r for r in result["runs"] if r["status"] == "failed"]
        recorder.failed = bool(failed)
    result |= {"parent_run_id": parent, "tracking": recorder.tracker.ui_hint()}
    if failed and study.raise_on_failure:
        raise _failure(failed, parent)
    return result


def _run(study: InverseStudy, recorder: InverseRecorder) -> dict[str, Any]:
    """Submit the simulations, record each as it finishes, then the parent's summary.

    Returns `{"runs": [InverseOutcome.to_dict() + "run_id", ...], "n_failed"}` in the order
    systems x step sizes.
    """
    grid = [(s, h) for s in study.systems for h in study.step_sizes()]
    futures = {
        inverse_tasks.simulate.submit(
            system,
            study.overrides,
            study.demand,
            study.method.value,
            dt,
            study.t_end,
            study.forward_check,
            study.systems,
        ): i
        for i, (system, dt) in enumerate(grid)
    }
    progress = Progress("simulations", len(grid), key="inverse-simulations")
    rows: list[dict[str, Any] | None] = [None] * len(grid)
    for fut in as_completed(list(futures)):
        outcome = fut.result()
        run_id = recorder.child(outcome, demand=study.demand, t_end=study.t_end)
        rows[futures[fut]] = {**outcome.to_dict(), "run_id": run_id}
        progress.advance()
    runs = [r for r in rows if r is not None]
    recorder.summary([_summary_row(r) for r in runs])
    return {"runs": runs, "n_failed": sum(r["status"] == "failed" for r in runs)}


def _summary_row(run: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "system", "method", "dt", "status", "max_constraint_violation", "tracking_error",
        "error_vs_exact", "wall_time_s", "compile_time_s", "error", "time", "run_id",
    )  # fmt: skip
    return {k: run.get(k) for k in keys}


def _failure(failed: list[dict[str, Any]], parent: str) -> InputError:
    if len(failed) == 1:
        f = failed[0]
        message = f"{f['system']} ({f['method']}, dt = {f['dt']:g} s): {f['error']}"
        return InverseProblemError(message, time=f.get("time"))
    lines = [f"{len(failed)} simulations failed (MLflow parent run {parent}):"]
    lines += [f"  {f['system']} ({f['method']}, dt = {f['dt']:g} s): {f['error']}" for f in failed]
    return InputError("\n".join(lines))


def run_inverse_study(
    study: InverseStudy, *, runner: RunnerKind | str = "thread", workers: int = 2
) -> dict[str, Any]:
    """Run the flow with a chosen task runner (threads, or a Dask cluster)."""
    return run_flow(inverse_simulation, study, runner=runner, workers=workers)

"""Flow `inverse-simulation`: feedforward controls of underactuated systems in partly
specified motion (docs/methods.md §3), several systems x step sizes in parallel, all tracked.

check settings (names, parameters, demand, horizon; `models.underactuated.study.check_study`; the settings
model is `flows/inverse/settings.py`) -> one task per system x step size (solve, forward
check, error vs exact) -> one MLflow child run per simulation under a parent run -> summary.
A failed simulation (infeasible demand, singular partition, Newton failure) is recorded as a
FAILED child run with its message and time; by default the flow then raises an `InputError`
naming every failure (after the others are recorded), so the Prefect run shows Failed.
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.futures import as_completed

from flows.artifacts import finish, flow_run_tags
from flows.inverse.settings import InverseStudy
from flows.progress import Progress
from flows.runners import RunnerKind, run_flow
from methods.dae import InverseProblemError
from methods.errors import InputError
from models.underactuated.study import check_study
from tasks.inverse import tasks as inverse_tasks
from tasks.inverse.records import InverseRecorder
from tasks.inverse.result import InverseStudyResult

#: the Prefect form's defaults (a complete form, not an optional one collapsed to None)
DEFAULT_STUDY = InverseStudy()

__all__ = ["InverseStudy", "inverse_simulation", "run_inverse_study"]


@flow(name="inverse-simulation", log_prints=True, persist_result=True, result_serializer="json")
def inverse_simulation(study: InverseStudy = DEFAULT_STUDY) -> InverseStudyResult:
    """Run every system x step size of `study`; returns the typed result (see `_run`)."""
    check_study(study.systems, study.overrides, study.demand, study.t_end, study.step_sizes())
    recorder = InverseRecorder(study.experiment)
    with recorder.session(study.model_dump(mode="json"), tags=flow_run_tags()) as parent:
        result = _run(study, recorder)
        failed = [r for r in result["runs"] if r["status"] == "failed"]
        recorder.failed = bool(failed)
    outcome = InverseStudyResult(
        tuple(result["runs"]), result["n_failed"], parent, recorder.tracker.ui_hint(),
        experiment_id=recorder.experiment_id(),
    )  # fmt: skip
    state = finish(outcome, "inverse-result", "one row per system x step size", recorder)
    if failed and study.raise_on_failure:
        raise _failure(failed, parent)
    return state


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
) -> InverseStudyResult:
    """Run the flow with a chosen task runner (threads, or a Dask cluster)."""
    result: InverseStudyResult = run_flow(inverse_simulation, study, runner=runner, workers=workers)
    return result

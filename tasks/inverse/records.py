"""What an inverse simulation records in MLflow: one parent run per invocation, a child per
system x step size (through `tracking.recorder.Recorder`, tag `greylab.study = inverse`).

Parent (`inverse-study`):
  params   the study settings (`systems`, `method`, `dt`/`dts`, `t_end`, `overrides`,
           `demand` as JSON or `default`, `forward_check`)
  metrics  `n_simulations`, `n_failed`, `max_constraint_violation` and `tracking_error`
           (worst over the children that succeeded)
  artifacts `study.json` (settings), `summary.csv` (one row per child: system, method, dt,
           status, headline metrics, error and time of failure)

Child (`<system>-<method>-dt<dt>`):
  params   `system`, `method`, `dt`, `t_end` (s, end of the computed horizon; the requested
           one if the solve failed), `demand` (JSON or `default`), `overrides` (JSON), and
           every system parameter by its plain name (`m_t`, `g`, ...) including overrides
  metrics  `max_constraint_violation` (max |Phi(q) - gamma(t)|, output units),
           `tracking_error` (forward check, max over outputs) and `tracking_error.<output>`,
           `error_vs_exact` (max over the exact table's columns of max |exact - computed|, SI
           units; only for systems with an exact solution) and `error_vs_exact.<column>`,
           `newton_iterations_total`, `newton_iterations_max`, `newton_iterations_mean`,
           `wall_time_s` (solve), `compile_time_s`, `forward_wall_time_s`, `n_steps`,
           `rank_CB`, `rank_p`, `rank_ok`; a failed solve records `failed_at_s` instead
  tags     `greylab.verdict` (`ok` or `failed`), `greylab.error` (the message), `greylab.warnings`;
           a lab's own system (docs/models.md) also `greylab.system_reference` (module:attr),
           `greylab.system_name` (its `name`), `greylab.system_source` (SHA-256 of its code)
  artifacts `trajectory.parquet` (t_s, coordinates, velocities, controls by name),
           `figures/trajectory.png` (demanded outputs, coordinates, controls),
           `figures/velocities.png` (demanded outputs, velocities, controls),
           `rank_info.json`, `result.json` (`InverseOutcome.to_dict()`: result, forward check,
           errors vs exact), `system.json` (names, parameters with units)
  status   FINISHED, or FAILED when the solve failed (with the message as tag)
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from models.underactuated.study import InverseOutcome
from tracking.recorder import Recorder

STUDY = "inverse"
_RESERVED = {"system", "method", "dt", "t_end", "demand", "overrides"}


def _demand_param(demand: dict | None) -> str:
    return "default" if demand is None else json.dumps(demand, sort_keys=True)


class InverseRecorder(Recorder):
    study = STUDY
    run_name = "inverse-study"

    def log_settings(self, settings: dict[str, Any]) -> None:
        params = {k: v for k, v in settings.items() if v is not None and k != "demand"}
        params["demand"] = _demand_param(settings.get("demand"))
        self.run.params(params)
        self.run.json(settings, "study.json")

    def child(self, outcome: InverseOutcome, *, demand: dict | None, t_end: float | None) -> str:
        """One child run for one simulation (see the module docstring for its content)."""
        name = f"{outcome.system} {outcome.method} {outcome.dt * 1e3:g} ms"
        name += "" if outcome.ok else " - failed"
        with self.child_run(name) as run:
            result = outcome.result
            horizon = float(result.table["t_s"].iloc[-1]) if result is not None else t_end
            run.params(_child_params(outcome, demand, horizon))
            if outcome.plugin is not None:  # a lab's own system: what ran, by code hash
                run.tags(_plugin_tags(outcome.plugin))
            if outcome.system_info:
                run.json(outcome.system_info, "system.json")
            if result is None:
                run.tags({"greylab.verdict": "failed", "greylab.error": outcome.error})
                if outcome.error_time is not None:
                    run.metrics({"failed_at_s": outcome.error_time})
                run.json(outcome.to_dict(), "result.json")
                run.failed = True
                return run.id
            run.metrics({k: float(v) for k, v in _child_metrics(outcome, result).items()})
            tags = {"greylab.verdict": "ok"}
            if result.warnings:
                tags["greylab.warnings"] = " | ".join(result.warnings)[:5000]
            run.tags(tags)
            run.table(result.table, "trajectory.parquet")
            run.json(result.rank_info.to_dict(), "rank_info.json")
            run.json(outcome.to_dict(), "result.json")
            for fig_name, fig in _figures(result, outcome.system_info):
                run.figure(fig, f"figures/{fig_name}.png")
        return run.id

    def summary(self, rows: list[dict[str, Any]]) -> None:
        """Parent: one summary row per child and the worst headline numbers."""
        frame = pd.DataFrame(rows)
        self.run.table(frame, "summary.csv")
        ok = frame[frame["status"] == "ok"] if "status" in frame else frame.iloc[:0]
        metrics = {
            "n_simulations": float(len(frame)),
            "n_failed": float(len(frame) - len(ok)),
        }
        for key in ("max_constraint_violation", "tracking_error"):
            if key in ok and ok[key].notna().any():
                metrics[key] = float(ok[key].max())
        self.run.metrics(metrics)


def _plugin_tags(plugin: dict[str, Any]) -> dict[str, str]:
    return {
        "greylab.system_reference": str(plugin.get("reference")),
        "greylab.system_name": str(plugin.get("name")),
        "greylab.system_source": str(plugin.get("source") or "unknown"),
    }


def _child_params(
    outcome: InverseOutcome, demand: dict | None, horizon: float | None
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "system": outcome.system,
        "method": outcome.method,
        "dt": outcome.dt,
        "demand": _demand_param(demand),
        "overrides": json.dumps(outcome.overrides, sort_keys=True),
    }
    if horizon is not None:
        params["t_end"] = horizon
    for key, value in outcome.parameters.items():
        params[f"p_{key}" if key in _RESERVED else key] = value
    return params


def _child_metrics(outcome: InverseOutcome, result: Any) -> dict[str, Any]:
    newton = result.newton_iterations
    metrics = {
        "max_constraint_violation": result.max_constraint_violation,
        "newton_iterations_total": newton["total"],
        "newton_iterations_max": newton["max"],
        "newton_iterations_mean": newton["mean"],
        "wall_time_s": result.wall_time_s,
        "compile_time_s": result.compile_time_s,
        "n_steps": result.n_steps,
        "rank_CB": result.rank_info.rank_CB,
        "rank_p": result.rank_info.p,
        "rank_ok": float(result.rank_info.ok),
    }
    if outcome.forward is not None:
        metrics["tracking_error"] = outcome.forward.max_error
        metrics["forward_wall_time_s"] = outcome.forward.wall_time_s
        metrics |= {f"tracking_error.{k}": v for k, v in outcome.forward.max_tracking_error.items()}
    if outcome.error_vs_exact:
        metrics["error_vs_exact"] = outcome.max_error_vs_exact or 0.0
        metrics |= {f"error_vs_exact.{k}": v for k, v in outcome.error_vs_exact.items()}
    return metrics


def _figures(result: Any, info: dict[str, Any]) -> list[tuple[str, Any]]:
    import matplotlib

    matplotlib.use("Agg")  # flows run headless, often in worker threads
    from methods.dae import plots

    trajectory = plots.plot_result(result, coordinate_names=list(info["coordinates"]))
    speeds = plots.plot_result(result, coordinate_names=list(info["velocities"]))
    speeds.axes[1].set_ylabel("velocities")
    return [("trajectory", trajectory), ("velocities", speeds)]

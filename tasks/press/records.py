"""What a press study records in MLflow: one parent run per invocation, a child per model.

Parent: study settings, dataset lineage, normality report, design table and figure, verdicts.
Child (one per candidate model): settings, estimates and standard errors, the p-value of every
test (`P_VALUES`, stepped by test, one batch; its smallest is the scalar `min_alpha`, the one
the verdict compares with `threshold`), rejections, fit/ellipsoid/tests artifacts, ellipsoid and
hysteresis figures.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from methods.press.plots import (
    design_curve_figure,
    design_figure,
    ellipsoid_figure,
    hysteresis_figure,
)
from models.registry import resolve_model
from products.register import register
from tracking.markdown import markdown_table
from tracking.protocol import RunTracker
from tracking.recorder import Recorder, Run

#: the p-value of each test, one step per test (the core's `alpha_min`: the smallest level at
#: which that test rejects); runs recorded before 2026-12-05 call the series `alpha_min`
#: (`OLD_P_VALUES`), next to the scalar `min_alpha`, its minimum
P_VALUES = "p_value"
OLD_P_VALUES = "alpha_min"


class PressRecorder(Recorder):
    study = "press"
    run_name = "press-study"

    def __init__(self, experiment: str, tracker: RunTracker | None = None) -> None:
        super().__init__(experiment, tracker)
        self.design_code = ""

    def cache(self, use: Any) -> None:
        """Which steps came from the cache (`tasks.cache.CacheUse`): tags `greylab.cache`
        (hit/partial/miss) and `greylab.cached_steps` on the parent and every model run."""
        self.cache_tags(use.tags())
        self.run.json(use.to_dict(), "cache.json")

    def normality(self, report: Any) -> None:
        self.run.json(report.to_dict(), "normality.json")
        rows = report.table
        self.run.metrics({f"normality.p.{r.sensor}": float(r.p_value) for r in rows.itertuples()})

    def tests_planned(self, requested: int, planned: int) -> None:
        """`n_tests`: the tests the run makes (a split kind may allow fewer distinct splits
        than asked for: then `n_tests_requested` too); never a setting the run did not use."""
        params: dict[str, Any] = {"n_tests": planned}
        if planned != requested:
            params["n_tests_requested"] = requested
        self.run.params(params)

    def design(self, design: Any, model: str | None = None) -> None:
        """The sensor design (`model`: the model it used, logged as `design_model`)."""
        run = self.run
        run.json(design.to_dict(), "design.json")
        run.table(design.table, "design.csv")
        self.design_code = str(design.best["code"])
        run.params({"design": self.design_code} | ({"design_model": model} if model else {}))
        search = design.search
        run.params({f"design_{k}": search[k] for k in ("method", "budget", "second_order")
                    if k in search})  # fmt: skip
        run.metrics({f"design.{k}": float(search[k]) for k in ("nodes", "gap", "seconds")
                     if isinstance(search.get(k), int | float) and np.isfinite(search[k])})  # fmt: skip
        # figures as builders: in the command line they are drawn after the answer (issue 31)
        if len(design.table) <= 40:  # one bar per subset
            run.figure(lambda: design_figure(design), "figures/design.png")
        run.figure(lambda: design_curve_figure(design), "figures/design_curve.png")

    def model_run(
        self,
        model: str,
        study: Any,
        fit: Any,
        detection: Any,
        sensors: list[str],
        path: str,
    ) -> tuple[str, str]:
        """One child run per candidate model (`path`: the corrected table, read once), with
        the fitted model registered as `press-<model>` when the study says so. Returns the
        run id and the registered model's URI (empty when not registered)."""
        verdict = "rejected" if detection.rejected else "passes"
        verdict = "inconclusive" if detection.inconclusive else verdict
        with self.child_run(f"{model} - {verdict}") as run:
            run.params(
                {
                    "model": model,
                    "sensors": ",".join(sensors),
                    "design": self.design_code,
                    "split": study.split.value,
                    "tol": study.tol,
                    "n_tests": detection.n_tests,  # run: a split kind may allow fewer
                    "statistic": study.statistic.value,  # the one used (`paper`: paper)
                    "paper": study.paper,
                    "correction": study.correction.value,
                    "seed": study.seed,
                    "calibration_fraction": study.calibration_fraction,
                }
            )
            run.metrics(_model_metrics(fit, detection))
            run.series(P_VALUES, detection.alpha_min)
            run.tags({"greylab.verdict": verdict})
            estimates = [[k, v, fit.standard_errors[k]] for k, v in fit.parameters.items()]
            note = (f"**{model}: {verdict}** ({detection.n_rejections} of {detection.n_tests} "
                    f"tests rejected, {study.split.value} splits)\n\n"
                    + markdown_table(["parameter", "estimate", "s.e."], estimates))  # fmt: skip
            run.tags({"mlflow.note.content": note})
            run.json(fit.to_dict(), "fit.json")
            run.json(fit.ellipsoid(0.95).to_dict(), "ellipsoid.json")
            run.json(detection.to_dict(), "detection.json")
            run.table(detection.tests, "tests.csv")
            # builders over what they draw, read now (the table file need not outlive the run)
            run.figure(partial(ellipsoid_figure, fit, detection), "figures/ellipsoid.png")
            hysteresis = partial(hysteresis_figure, resolve_model(model), self.table(path), fit,
                                 sensors=list(sensors))  # fmt: skip
            run.figure(hysteresis, "figures/hysteresis.png")
            uri = self._register(run, model, fit, path, verdict) if study.register_model else ""
        return run.id, uri

    def _register(self, run: Run, model: str, fit: Any, path: str, verdict: str) -> str:
        """The fit as the MLflow model `press-<model>`; input example: the study's ordered
        force scenario for the fitted sensors."""
        from methods.press.data import to_cube
        from products.pyfunc import press_spec, registered_name

        data = to_cube(self.table(path), list(fit.sensors))
        n_q, n_s = data.setpoints.size, len(fit.sensors)
        example = pd.DataFrame(
            {"step": np.repeat(np.arange(n_q), n_s), "force_N": np.repeat(data.setpoints, n_s),
             "sensor": np.tile(np.array(fit.sensors, dtype=object), n_q)}
        )  # fmt: skip
        spec = press_spec(model, fit, all_sensors=list(resolve_model(model).sensors))
        registered = register(self,
            run, spec, name=registered_name("press", model), input_example=example,
            tags={"greylab.verdict": verdict, "greylab.model": model,
                  "greylab.sensors": ",".join(fit.sensors)},
            description=f"**{verdict}** by the study of run {run.id}. Press model {model} "
            "calibrated by weighted least squares (greylab press detect): displacement and its "
            "standard deviation per sensor",
            accepted=verdict == "passes",
        )  # fmt: skip
        return registered["uri"]

    def verdicts(self, verdicts: list[dict[str, Any]]) -> None:
        frame = pd.DataFrame(
            [{k: v for k, v in row.items() if not isinstance(v, dict)} for row in verdicts]
        )
        self.run.table(frame, "verdicts.csv")
        # per model on the parent too: MLflow's comparison of parent runs shows the verdicts
        per_model: dict[str, float] = {}
        for row in verdicts:
            model = re.sub(r"[^A-Za-z0-9_.-]", ".", str(row["model"]))  # a metric key
            per_model[f"{model}.rejected"] = float(bool(row["rejected"]))
            for key in ("inconclusive", "n_rejections", "min_alpha"):
                if key in row:
                    per_model[f"{model}.{key}"] = float(row[key])
        self.run.metrics({"n_models_rejected": float(frame["rejected"].sum())} | per_model)


def _model_metrics(fit: Any, detection: Any) -> dict[str, float]:
    metrics = {f"param.{k}": float(v) for k, v in fit.parameters.items()}
    metrics |= {f"stderr.{k}": float(s) for k, s in fit.standard_errors.items()}
    return metrics | {
        "rejected": float(detection.rejected),
        "n_rejections": float(detection.n_rejections),
        "n_failed": float(detection.n_failed),
        "inconclusive": float(detection.inconclusive),
        "min_alpha": float(np.nanmin(detection.alpha_min, initial=np.inf)),
        "threshold": float(detection.threshold),
        "fit_cost": float(fit.cost),
    }

"""What a press study records in MLflow: one parent run per invocation, a child per model.

Parent: study settings, dataset lineage, normality report, design table and figure, verdicts.
Child (one per candidate model): settings, estimates and standard errors, `alpha_min` per test
(stepped metric, one batch), rejections, fit/ellipsoid/tests artifacts, ellipsoid and
hysteresis figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from methods.press.plots import design_figure, ellipsoid_figure, hysteresis_figure
from models.registry import resolve_model
from tasks.tracking import StudyRecorder, Tracker


class PressRecorder(StudyRecorder):
    study = "press"
    run_name = "press-study"

    def __init__(self, experiment: str, tracker: Tracker | None = None) -> None:
        super().__init__(experiment, tracker)
        self.shared_tags: dict[str, str] = {}  # copied onto every child run
        self.design_code = ""

    def lineage(self, path: str, source: str) -> None:
        digest = self.tracker.log_dataset(self.run_id, path, description=source, name="press")
        self.shared_tags = {"greylab.data_hash": digest, "greylab.data_source": source}

    def cache(self, use: Any) -> None:
        """Which steps came from the cache (`tasks.cache.CacheUse`): tags `greylab.cache`
        (hit/partial/miss) and `greylab.cached_steps` on the parent and every model run."""
        tags = use.tags()
        self.tracker.set_tags(self.run_id, tags)
        self.tracker.log_json(self.run_id, use.to_dict(), "cache.json")
        self.shared_tags = {**self.shared_tags, **tags}

    def normality(self, report: Any) -> None:
        self.tracker.log_json(self.run_id, report.to_dict(), "normality.json")
        rows = report.table
        self.tracker.log_metrics(
            self.run_id,
            {f"normality.p.{r.sensor}": float(r.p_value) for r in rows.itertuples()},
        )

    def design(self, design: Any) -> None:
        self.tracker.log_json(self.run_id, design.to_dict(), "design.json")
        self.tracker.log_table(self.run_id, design.table, "design.csv")
        self.design_code = str(design.best["code"])
        self.tracker.log_params(self.run_id, {"design": self.design_code})
        self.tracker.log_figure(self.run_id, design_figure(design), "figures/design.png")

    def model_run(
        self,
        model: str,
        study: Any,
        fit: Any,
        detection: Any,
        sensors: list[str],
        path: str,
    ) -> str:
        t = self.tracker
        run = t.start_run(
            self.experiment,
            f"model-{model}",
            study="press",
            parent_run_id=self.run_id,
            tags=self.shared_tags,
        )
        t.log_params(
            run,
            {
                "model": model,
                "sensors": ",".join(sensors),
                "design": self.design_code,
                "split": study.split.value,
                "tol": study.tol,
                "n_tests": study.n_tests,
                "statistic": study.statistic.value,
                "correction": study.correction.value,
                "seed": study.seed,
                "calibration_fraction": study.calibration_fraction,
            },
        )
        metrics = {f"param.{k}": float(v) for k, v in fit.parameters.items()}
        metrics |= {f"stderr.{k}": float(s) for k, s in fit.standard_errors.items()}
        metrics |= {
            "rejected": float(detection.rejected),
            "n_rejections": float(detection.n_rejections),
            "n_failed": float(detection.n_failed),
            "inconclusive": float(detection.inconclusive),
            "min_alpha": float(np.nanmin(detection.alpha_min, initial=np.inf)),
            "threshold": float(detection.threshold),
            "fit_cost": float(fit.cost),
        }
        t.log_metrics(run, metrics)
        t.log_series(run, "alpha_min", detection.alpha_min)
        verdict = "rejected" if detection.rejected else "passes"
        t.set_tags(run, {"greylab.verdict": "inconclusive" if detection.inconclusive else verdict})
        t.log_json(run, fit.to_dict(), "fit.json")
        t.log_json(run, fit.ellipsoid(0.95).to_dict(), "ellipsoid.json")
        t.log_json(run, detection.to_dict(), "detection.json")
        t.log_table(run, detection.tests, "tests.csv")
        t.log_figure(run, ellipsoid_figure(fit, detection), "figures/ellipsoid.png")
        table = pd.read_parquet(path)
        t.log_figure(
            run,
            hysteresis_figure(resolve_model(model), table, fit, sensors=sensors),
            "figures/hysteresis.png",
        )
        t.end_run(run)
        return run

    def verdicts(self, verdicts: list[dict[str, Any]]) -> None:
        frame = pd.DataFrame(
            [{k: v for k, v in row.items() if not isinstance(v, dict)} for row in verdicts]
        )
        self.tracker.log_table(self.run_id, frame, "verdicts.csv")
        self.tracker.log_metrics(self.run_id, {"n_models_rejected": float(frame["rejected"].sum())})

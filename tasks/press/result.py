"""What the press study returns: a typed, frozen result with `to_dict()` (plain JSON types, the
keys of `--json` and of the Prefect result), `headline()` and `markdown()` (the run page)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tracking.markdown import cell, markdown_table, run_ref


@dataclass(frozen=True)
class ModelVerdict:
    """One candidate model of a press study: verdict, tests and the full-data fit."""

    model: str
    verdict: str  # "model uncertainty detected", "passes", "inconclusive"
    rejected: bool
    n_rejections: int
    n_failed: int
    inconclusive: bool
    min_alpha: float
    threshold: float
    parameters: dict[str, float]
    standard_errors: dict[str, float]
    run_id: str
    model_uri: str = ""  # the registered MLflow model (models:/press-<model>/<version>)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PressResult:
    """A press study: the design, the normality report and a verdict per model."""

    data_hash: str
    sensors: list[str]
    design: dict[str, Any]
    normality: dict[str, Any]
    verdicts: tuple[ModelVerdict, ...]
    warnings: tuple[str, ...]
    cache: dict[str, Any]
    parent_run_id: str
    tracking: str
    experiment_id: str = ""  # MLflow experiment of the runs (links to their pages)
    paper: bool = False  # the paper's test (`--paper`)
    statistic: str = ""  # the test statistic used (difference, or paper)
    correction: str = ""  # the multiple-testing correction used

    def _link(self, run_id: Any) -> Any:
        return run_ref(run_id, self.experiment_id)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdicts"] = [v.to_dict() for v in self.verdicts]
        out["warnings"] = list(self.warnings)
        return out

    def headline(self) -> str:
        """The outcome in one line (MLflow run name, Prefect state message)."""
        groups: dict[str, list[str]] = {}
        for v in self.verdicts:
            status = "inconclusive" if v.inconclusive else "rejected" if v.rejected else "passes"
            groups.setdefault(status, []).append(v.model)
        parts = [f"{', '.join(models)} {'pass' if status == 'passes' and len(models) > 1 else status}"
                 for status, models in groups.items()]  # fmt: skip
        return "press: " + "; ".join(parts)

    def markdown(self) -> str:
        """The verdict table for the Prefect run page."""
        rows = [
            [v.model, v.verdict, v.n_rejections, v.n_failed, v.min_alpha, v.threshold,
             ", ".join(f"{k} = {x:.4g} ± {v.standard_errors[k]:.2g}"
                       for k, x in v.parameters.items()), self._link(v.run_id), v.model_uri or "-"]
            for v in self.verdicts
        ]  # fmt: skip
        columns = ["model", "verdict", "rejections", "failed", "min alpha", "threshold",
                   "estimates ± s.e.", "MLflow run", "registered model"]  # fmt: skip
        lines = [f"# Press study: sensors {cell(', '.join(self.sensors))}", "",
                 markdown_table(columns, rows), "",
                 f"Sensor design: {cell(self.design.get('criterion', ''))}-optimal for "
                 f"{cell(self.design.get('model', '-'))} "
                 f"({cell(self.design.get('model_chosen_by', '-'))})", "",
                 *self._test_lines(),
                 f"MLflow parent run {cell(self._link(self.parent_run_id))}, data hash "
                 f"{cell(self.data_hash[:12])}"]  # fmt: skip
        lines += [f"- warning: {cell(w)}" for w in self.warnings]
        return "\n".join(lines)

    def _test_lines(self) -> list[str]:
        """`Test: statistic paper, bonferroni correction (the paper's test)`, if recorded."""
        if not self.statistic:
            return []
        paper = " (the paper's test, --paper)" if self.paper else ""
        return [f"Test: statistic {cell(self.statistic)}, {cell(self.correction)} "
                f"correction{paper}", ""]  # fmt: skip

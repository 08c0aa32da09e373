"""What the press study returns: a typed, frozen result with `to_dict()` (plain JSON types, the
keys of `--json` and of the Prefect result), `headline()` and `markdown()` (the run page)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tracking.markdown import Link, cell, markdown_table, run_ref

#: the one verdict vocabulary of the press study (CLI, --json, artifacts, state, MLflow names,
#: tags and `greylab compare`): the core's "model uncertainty detected" is "rejected"
REJECTED, PASSES, INCONCLUSIVE = "rejected", "passes", "inconclusive"


def verdict_word(rejected: bool, inconclusive: bool) -> str:
    return INCONCLUSIVE if inconclusive else REJECTED if rejected else PASSES


@dataclass(frozen=True)
class ModelVerdict:
    """One candidate model of a press study: verdict, tests and the full-data fit."""

    model: str
    verdict: str  # "rejected" (model uncertainty detected), "passes", "inconclusive"
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
            status = verdict_word(v.rejected, v.inconclusive)
            groups.setdefault(status, []).append(v.model)
        parts = [f"{', '.join(models)} {'pass' if status == 'passes' and len(models) > 1 else status}"
                 for status, models in groups.items()]  # fmt: skip
        return "press: " + "; ".join(parts)

    def markdown(self) -> str:
        """The verdict table for the Prefect run page."""
        rows = [
            [v.model, verdict_word(v.rejected, v.inconclusive), v.n_rejections, v.n_failed, v.min_alpha, v.threshold,
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

    def summary(self) -> str:
        """The answer at a glance for the run page (fits a laptop screen): the outcome, the
        warnings, one short row per model with a link labelled "run" to its MLflow run; the
        estimates and the registered models are in the full result (`markdown()`)."""
        rows = [[v.model, verdict_word(v.rejected, v.inconclusive), v.n_rejections,
                 v.n_failed, v.min_alpha, v.threshold, self._short(v.run_id, "run"),
                 self._short_model(v.model_uri)] for v in self.verdicts]  # fmt: skip
        columns = ["model", "verdict", "rejections", "failed", "min alpha", "threshold",
                   "MLflow", "registered"]  # fmt: skip
        lines = [f"# {cell(self.headline())}", ""]
        lines += [f"**Warning:** {cell(w)}" for w in self.warnings]
        lines += ["", markdown_table(columns, rows), "",
                  f"Sensors {cell(', '.join(self.sensors))}; all runs: "
                  f"{cell(self._short(self.parent_run_id, 'parent run'))}; details: the "
                  "press-result artifact"]  # fmt: skip
        return "\n".join(lines)

    def _short(self, run_id: str, label: str) -> Any:
        link = self._link(run_id)
        return Link(label, link.url) if isinstance(link, Link) else (run_id[:8] or "-")

    @staticmethod
    def _short_model(uri: str) -> str:
        """`models:/press-M3/2` -> `press-M3 v2`."""
        if not uri.startswith("models:/"):
            return uri or "-"
        name, _, version = uri.removeprefix("models:/").rpartition("/")
        return f"{name} v{version}" if name else uri

    def _test_lines(self) -> list[str]:
        """`Test: statistic paper, bonferroni correction (the paper's test)`, if recorded."""
        if not self.statistic:
            return []
        paper = " (the paper's test, --paper)" if self.paper else ""
        return [f"Test: statistic {cell(self.statistic)}, {cell(self.correction)} "
                f"correction{paper}", ""]  # fmt: skip

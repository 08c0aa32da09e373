"""What the press and drive flows return: typed, frozen results with `to_dict()` (plain JSON
types, the keys of `--json` and of the Prefect result). The CLI renders them; the recorders
have logged them already. (The inverse study returns its runs as `tasks.inverse` outcomes.)"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>|~])")


@dataclass(frozen=True)
class Link:
    """A link greylab makes (to an MLflow run): its text is escaped like any cell, its URL is
    percent-encoded (no parenthesis or space can end it early)."""

    text: str
    url: str


def mlflow_ui() -> str:
    """The MLflow web UI of the tracking server (`http(s)://…`); empty for a local store."""
    from tasks.settings import load_settings

    uri = load_settings().tracking_uri
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else ""


def run_ref(run_id: Any, experiment_id: str = "") -> Any:
    """An MLflow run id as a link to its page when a tracking server has one, opened in
    MLflow 3's model-training view (its UI starts in the GenAI view unless the URL says so;
    the short `#/runs/<id>` route redirects and drops that, hence the experiment)."""
    base = mlflow_ui()
    if not (base and run_id):
        return run_id
    page = f"experiments/{experiment_id}/runs/{run_id}" if experiment_id else f"runs/{run_id}"
    return Link(str(run_id), f"{base}/#/{page}?workflowType=machine_learning")


def cell(value: Any) -> str:
    """A value as one Markdown table cell: numbers to 4 digits, text from files or users with
    every Markdown/HTML special character escaped and line breaks removed (a model or
    structure name cannot break the table, link anywhere or inject markup)."""
    if isinstance(value, Link):
        return f"[{cell(value.text)}]({quote(value.url, safe=':/#?=&%.-_~')})"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.4g}"
    text = " ".join(str(value).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "| " + " | ".join(cell(c) for c in columns) + " |"
    rule = "|" + "---|" * len(columns)
    return "\n".join([head, rule, *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows)])


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


@dataclass(frozen=True)
class DriveResult:
    """A drive structure search: the best structure, its parameters and fit."""

    best_structure: list[str]
    best_codes: list[int]
    parameters: dict[str, float]
    rss: float
    fitness: float
    generations: int
    run_id: str
    data_hash: str
    source: str
    resumed_from: int | None
    preset: str
    tracking: str
    history: tuple[dict[str, Any], ...] = ()
    model_uri: str = ""  # the registered MLflow model (models:/drive-<campaign>/<version>)
    #: open-loop validation on `validation_data`: output -> rmse, fit, r2, max_abs, n
    validation: dict[str, dict[str, float]] = field(default_factory=dict)
    validation_run_id: str = ""
    experiment_id: str = ""  # MLflow experiment of the runs (links to their pages)
    paper: bool = False  # the seed paper's search (`--paper`)
    #: every GP setting the search ran with (`GPSettings.to_dict()`)
    settings: dict[str, Any] = field(default_factory=dict)
    #: with the `data` preset: the recording's scales (`models.drivetrain.scales.Scales`)
    scales: dict[str, Any] | None = None
    #: structures the local search after the last generation moved to, in order ("2,5,6,7")
    polish_moves: list[str] = field(default_factory=list)
    #: the evidence for the answer (`models.drivetrain.evidence.Evidence.to_dict()`):
    #: parameter intervals, residual tests, rival table
    evidence: dict[str, Any] | None = None
    #: a fit of a named structure (`greylab drive fit`), not a search
    fit: bool = False

    def _link(self, run_id: Any) -> Any:
        return run_ref(run_id, self.experiment_id)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `greylab drive identify --json` (the per-generation history is in
        MLflow, `history.csv`)."""
        out = asdict(self)
        del out["history"], out["tracking"]
        return out

    def headline(self) -> str:
        """`{2,5,6,7} - fitness 0.93` (and the validation's position R^2 when validated)."""
        codes = ",".join(map(str, self.best_codes))
        line = f"{'fit ' if self.fit else ''}{{{codes}}} - fitness {self.fitness:.3g}"
        if "position" in self.validation:
            line += f", validation position R^2 {self.validation['position']['r2']:.4f}"
        return line

    def markdown(self) -> str:
        """The best structure and its parameters for the Prefect run page."""
        rows = [[name, value] for name, value in self.parameters.items()]
        what = "Drive structure fit" if self.fit else "Drive structure search"
        return "\n".join([
            f"# {what}: {cell(', '.join(self.best_structure))} "
            f"(codes {cell(self.best_codes)})", "",
            f"fitness {cell(self.fitness)}, RSS {cell(self.rss)}, {self.generations} "
            f"generations, preset {cell(self.preset)}{self._paper_words()}", "",
            markdown_table(["parameter", "value"], rows), "",
            f"MLflow run {cell(self._link(self.run_id))}, data hash {cell(self.data_hash[:12])}, "
            f"registered model {cell(self.model_uri or '-')}", *self._validation_lines(),
            *evidence_lines(self.evidence),
        ])  # fmt: skip

    def _paper_words(self) -> str:
        """`, the paper's search (6 x 20, roulette)` when `paper`."""
        if not self.paper:
            return ""
        s = self.settings
        return (f", the paper's search ({s.get('population')} x {s.get('generations')}, "
                f"{s.get('selection')})")  # fmt: skip

    def _validation_lines(self) -> list[str]:
        if not self.validation:
            return []
        rows = [[out, m["rmse"], m["fit"], m["r2"], m["max_abs"]]
                for out, m in self.validation.items()]  # fmt: skip
        return ["", f"## Open-loop validation (MLflow run {cell(self._link(self.validation_run_id))})", "",
                markdown_table(["output", "RMSE", "fit %", "R^2", "max abs error"], rows)]  # fmt: skip


def evidence_lines(evidence: dict[str, Any] | None) -> list[str]:
    """The evidence of a drive result as Markdown: intervals, residual tests, rival table."""
    if not evidence:
        return []
    level = f"{100 * evidence['level']:g} %"
    params = [[name, p["value"], p["stderr"] if p["stderr"] is not None else math.inf,
               p["lower"] if p["lower"] is not None else math.nan,
               p["upper"] if p["upper"] is not None else math.nan, p["note"] or "-"]
              for name, p in evidence["parameters"].items()]  # fmt: skip
    res = evidence["residuals"]
    verdict = ("exact fit (not tested)" if res["passed"] is None
               else "pass" if res["passed"] else "FAIL")  # fmt: skip
    lines = ["", "## Evidence", "",
             markdown_table(["parameter", "value", "std. error", f"{level} lower",
                             f"{level} upper", "note"], params), "",
             f"Residual tests ({cell(100 * res['confidence'])} %, N = {res['n']}): {verdict}; "
             f"autocorrelation {'pass' if res['autocorrelation']['passed'] else 'FAIL'}, "
             f"cross-correlation with the input "
             f"{'pass' if res['cross_correlation']['passed'] else 'FAIL'}"]  # fmt: skip
    rivals = evidence.get("rivals")
    if rivals:
        rows = [[",".join(map(str, r["codes"])), r["relation"], r["rss"], r["n_params"],
                 r["aic"], r["bic"], r["p_value"] if r["p_value"] is not None else math.nan,
                 r["note"] or "-"] for r in rivals["rows"]]  # fmt: skip
        preferred = ",".join(map(str, rivals["preferred"]))
        lines += ["", f"Rivals on the {cell(rivals['part'])}: preferred {{{cell(preferred)}}} "
                  f"({cell(rivals['rule'])})", "",
                  markdown_table(["codes", "relation", "RSS", "parameters", "AIC", "BIC",
                                  "F-test p", "note"], rows)]  # fmt: skip
    return lines + [f"- {cell(n)}" for n in evidence.get("notes", [])]


@dataclass(frozen=True)
class InverseResult:
    """An inverse study: one row per system x step size (`tasks.inverse` outcome as JSON plus
    its MLflow `run_id`), in the order systems x step sizes."""

    runs: tuple[dict[str, Any], ...]
    n_failed: int
    parent_run_id: str
    tracking: str
    experiment_id: str = ""  # MLflow experiment of the runs (links to their pages)

    def _link(self, run_id: Any) -> Any:
        return run_ref(run_id, self.experiment_id)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "runs": [dict(r) for r in self.runs]}

    def headline(self) -> str:
        return f"inverse: {len(self.runs) - self.n_failed} ok, {self.n_failed} failed"

    def markdown(self) -> str:
        """The summary table for the Prefect run page."""
        rows = [
            [r.get("system"), r.get("method"), r.get("dt"), r.get("status"),
             r.get("max_constraint_violation"), r.get("tracking_error"), r.get("wall_time_s"),
             r.get("error") or "", self._link(r.get("run_id"))]
            for r in self.runs
        ]  # fmt: skip
        columns = ["system", "method", "dt", "status", "max violation", "forward-check error",
                   "wall time s", "error", "MLflow run"]  # fmt: skip
        return "\n".join([
            f"# Inverse simulation: {self.headline().removeprefix('inverse: ')}",
            "", markdown_table(columns, rows), "", f"MLflow parent run {cell(self._link(self.parent_run_id))}",
        ])  # fmt: skip


@dataclass(frozen=True)
class IngestResult:
    """An ingestion run: the core's report (`ingestion.IngestReport.to_dict()`), its MLflow
    run and the studies it started."""

    report: dict[str, Any]
    run_id: str | None
    tracking: dict[str, Any]
    studies: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """The report's keys plus `run_id`, `tracking`, `studies` (the `--json` of `ingest`)."""
        return {**self.report, "run_id": self.run_id, "tracking": dict(self.tracking),
                "studies": [dict(s) for s in self.studies]}  # fmt: skip

    def headline(self) -> str:
        counts = self.report.get("counts", {})
        shown = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or "nothing new"
        return f"ingest: {shown}"

    def markdown(self) -> str:
        """Counts and every file not ingested, for the Prefect run page."""
        counts = self.report.get("counts", {})
        rows = [
            [o.get("name", ""), o.get("status"), o.get("message") or ""]
            for o in self.report.get("outcomes", [])
            if o.get("status") not in ("ingested", "resumed")
        ]
        lines = ["# Ingestion", "", markdown_table(list(counts), [list(counts.values())])]
        if rows:
            lines += ["", markdown_table(["file", "status", "reason"], rows)]
        lines += ["", f"rows stored: {cell(self.report.get('rows', 0))}; MLflow run "
                  f"{cell(run_ref(self.run_id) or '-')}"]  # fmt: skip
        if self.studies:  # what --trigger-studies started, with which settings
            columns = ["study", "campaign", "status", "settings", "reason"]
            studies = [[s.get(c) or "" for c in columns] for s in self.studies]
            lines += ["", "## Studies", "", markdown_table(columns, studies)]
        return "\n".join(lines)

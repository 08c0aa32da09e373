"""What the press and drive flows return: typed, frozen results with `to_dict()` (plain JSON
types, the keys of `--json` and of the Prefect result). The CLI renders them; the recorders
have logged them already. (The inverse study returns its runs as `tasks.inverse` outcomes.)"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>|~])")


def cell(value: Any) -> str:
    """A value as one Markdown table cell: numbers to 4 digits, text from files or users with
    every Markdown/HTML special character escaped and line breaks removed (a model or
    structure name cannot break the table, link anywhere or inject markup)."""
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

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdicts"] = [v.to_dict() for v in self.verdicts]
        out["warnings"] = list(self.warnings)
        return out

    def markdown(self) -> str:
        """The verdict table for the Prefect run page."""
        rows = [
            [v.model, v.verdict, v.n_rejections, v.n_failed, v.min_alpha, v.threshold,
             ", ".join(f"{k} = {x:.4g} ± {v.standard_errors[k]:.2g}"
                       for k, x in v.parameters.items()), v.run_id]
            for v in self.verdicts
        ]  # fmt: skip
        columns = ["model", "verdict", "rejections", "failed", "min alpha", "threshold",
                   "estimates ± s.e.", "MLflow run"]  # fmt: skip
        lines = [f"# Press study: sensors {cell(', '.join(self.sensors))}", "",
                 markdown_table(columns, rows), "",
                 f"MLflow parent run {cell(self.parent_run_id)}, data hash "
                 f"{cell(self.data_hash[:12])}"]  # fmt: skip
        lines += [f"- warning: {cell(w)}" for w in self.warnings]
        return "\n".join(lines)


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

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `greylab drive identify --json` (the per-generation history is in
        MLflow, `history.csv`)."""
        out = asdict(self)
        del out["history"], out["tracking"]
        return out

    def markdown(self) -> str:
        """The best structure and its parameters for the Prefect run page."""
        rows = [[name, value] for name, value in self.parameters.items()]
        return "\n".join([
            f"# Drive structure search: {cell(', '.join(self.best_structure))} "
            f"(codes {cell(self.best_codes)})", "",
            f"fitness {cell(self.fitness)}, RSS {cell(self.rss)}, {self.generations} "
            f"generations, preset {cell(self.preset)}", "",
            markdown_table(["parameter", "value"], rows), "",
            f"MLflow run {cell(self.run_id)}, data hash {cell(self.data_hash[:12])}",
        ])  # fmt: skip

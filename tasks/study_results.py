"""What the press and drive flows return: typed, frozen results with `to_dict()` (plain JSON
types, the keys of `--json` and of the Prefect result). The CLI renders them; the recorders
have logged them already. (The inverse study returns its runs as `tasks.inverse` outcomes.)"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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

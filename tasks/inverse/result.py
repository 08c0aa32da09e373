"""What the inverse study returns: its runs (one `models.underactuated.study.InverseOutcome`
per system x step size) as a typed, frozen result with `to_dict()`, `headline()` and
`markdown()`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tracking.markdown import cell, markdown_table, run_ref


@dataclass(frozen=True)
class InverseStudyResult:
    """An inverse study: one row per system x step size (`models.underactuated.study` outcome as JSON plus
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

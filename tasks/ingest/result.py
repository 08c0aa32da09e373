"""What the ingestion flow returns: the core's `IngestReport` as a typed, frozen result with
`to_dict()`, `headline()` and `markdown()`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracking.markdown import cell, markdown_table, run_ref


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

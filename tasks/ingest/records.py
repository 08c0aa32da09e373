"""The MLflow record of one ingestion run, through the recorder base (`tracking.recorder`).

One run per ingestion in the experiment (default `ingest-lab-data`): the folders and `dry_run`
as params, the counts as metrics, `ingest/files.csv` (every outcome), `ingest/rejects.csv`
(quarantined and duplicate files, when any) and `ingest/report.json`. Text cells of the CSV
tables that a spreadsheet would evaluate are neutralised.
"""

from __future__ import annotations

from ingestion.results import IngestReport, Status, neutralise_formulas
from tracking.protocol import RunTracker
from tracking.recorder import Recorder

EXPERIMENT = "ingest-lab-data"


class IngestRecorder(Recorder):
    """Writes one `IngestReport` as one run (study tag `ingest`)."""

    study = "ingest"

    def record(self, report: IngestReport) -> str:
        """The run id; the run ends FAILED if writing any part of it fails."""
        self.run_name = f"ingest {report.started}"
        settings = {"inbox": report.inbox, "data_root": report.data_root, "dry_run": report.dry_run}
        with self.session(settings) as run_id:
            self.run.metrics(
                {
                    "files": len(report.outcomes),
                    "ingested": report.count(Status.ingested),
                    "resumed": report.count(Status.resumed),
                    "duplicates": report.count(Status.duplicate),
                    "quarantined": report.count(Status.quarantined),
                    "skipped": report.count(Status.skipped),
                    "rows": report.rows,
                }
            )
            table = neutralise_formulas(report.table())
            self.run.table(table, "ingest/files.csv")
            rejects = table[table["status"].isin([Status.quarantined, Status.duplicate])]
            if not rejects.empty:
                self.run.table(rejects, "ingest/rejects.csv")
            self.run.json(report.to_dict(), "ingest/report.json")
        return run_id


def log_ingestion(
    report: IngestReport, experiment: str = EXPERIMENT, tracker: RunTracker | None = None
) -> str:
    """One MLflow run per ingestion (`tracker`: default `tracking.mlflow_tracker.Tracker`); its id."""
    return IngestRecorder(experiment, tracker).record(report)

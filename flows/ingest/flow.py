"""Flow `ingest-lab-data`: inbox -> validated Parquet dataset, archive, quarantine, ledger;
one MLflow run per ingestion; optionally (`trigger_studies`) a study for each campaign with new
data, as the data root's `campaigns.toml` configures it (`flows.campaign_studies`).

Rules (study by columns, campaign by file name, layout, crash safety): the `ingestion` package.
Entry point for deployments: `flows/ingest/flow.py:ingest_lab_data`; for the CLI: `run_ingest`.
Settings: `IngestSettings` (flows/ingest/settings.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prefect import flow

from flows.artifacts import finish
from flows.campaign_studies import start_studies
from flows.ingest.settings import IngestSettings
from runtime.settings import INBOX_DIR, load_settings
from tasks.ingest import tasks as ingest_tasks
from tasks.ingest.result import IngestResult

#: the Prefect form's defaults (a complete form, not an optional one collapsed to None)
DEFAULT_SETTINGS = IngestSettings()

__all__ = ["IngestSettings", "ingest_lab_data", "run_ingest", "track_report"]


@flow(name="ingest-lab-data", log_prints=True, persist_result=True, result_serializer="json")
def ingest_lab_data(settings: IngestSettings = DEFAULT_SETTINGS) -> IngestResult:
    inbox, data_root = settings.folders()
    if inbox == data_root / INBOX_DIR:
        inbox.mkdir(parents=True, exist_ok=True)  # the default inbox may simply not exist yet
    report = ingest_tasks.ingest_inbox_task(
        str(inbox), str(data_root), settings.dry_run, settings.settle_seconds, settings.campaign
    )
    print(report.summary())
    tracking = track_report(report, settings) if settings.track and not settings.dry_run else {}
    if tracking.get("error"):
        print(tracking["message"])
    studies = []
    if settings.trigger_studies and not settings.dry_run:
        studies = start_studies(report, data_root)
        for study in studies:
            if study["status"] in ("refused", "failed"):
                print(f"{study['study']} study of {study['campaign']} {study['status']}: "
                      f"{study['reason']}")  # fmt: skip
    result = IngestResult(report.to_dict(), tracking.get("run_id"), tracking, tuple(studies))
    return finish(result, "ingest-result", "counts and files not ingested")


def track_report(report: ingest_tasks.IngestReport, settings: IngestSettings) -> dict[str, Any]:
    """Log the report to MLflow; if tracking is unavailable, say what was stored and what was
    not tracked instead of failing (the data is stored and in the ledger already)."""
    try:
        run_id = ingest_tasks.log_ingestion_task(report, settings.experiment)
    except Exception as exc:
        stored = ", ".join(f"{n} {s}" for s, n in report.counts.items() if n) or "nothing"
        message = (
            f"not tracked: MLflow ({load_settings().tracking_uri}) failed: "
            f"{type(exc).__name__}: {str(exc)[:300]}. Stored: {report.rows} rows ({stored}) "
            f"under {report.data_root}, recorded in its ledger.jsonl; the MLflow run of this "
            "ingestion (counts, files.csv, report.json) was not written."
        )
        return {"run_id": None, "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                "message": message}  # fmt: skip
    return {"run_id": run_id, "error": None, "message": f"tracked as MLflow run {run_id}"}


def run_ingest(
    settings: IngestSettings | dict[str, Any] | None = None,
    *,
    inbox: str | Path | None = None,
    data_root: str | Path | None = None,
) -> dict[str, Any]:
    """Run the flow once (for `greylab ingest`); returns the report as plain JSON types.

    `inbox`/`data_root` are the local CLI user's choice of their own folders: they configure
    this process (as `GREYLAB_INBOX`/`GREYLAB_DATA_ROOT` would), they are not flow parameters.
    Keys: inbox, data_root, dry_run, started, finished, counts {ingested, resumed, duplicate,
    quarantined, skipped}, rows, new_data, outcomes, run_id (MLflow), tracking, studies.
    """
    settings = IngestSettings.model_validate(settings or {})
    overrides = {"GREYLAB_DATA_ROOT": data_root, "GREYLAB_INBOX": inbox}
    if data_root is not None and inbox is None:
        overrides["GREYLAB_INBOX"] = Path(data_root) / INBOX_DIR
    saved = {k: os.environ.get(k) for k in overrides}
    try:
        for key, value in overrides.items():
            if value is not None:
                os.environ[key] = str(Path(value).resolve())
        return ingest_lab_data(settings).to_dict()
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old

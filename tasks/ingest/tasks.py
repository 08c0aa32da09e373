"""Prefect tasks of ingestion (thin): the core is the `ingestion` package, the MLflow record is
`tasks.ingest.records`.

The names of the core that flows and users import from here are re-exported.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from ingestion.errors import IngestBusyError, IngestError
from ingestion.layout import part_path
from ingestion.names import safe_name
from ingestion.readers import campaign_table, drive_recording, read_dataset
from ingestion.results import FileOutcome, IngestReport, Status
from ingestion.rules import (
    DEFAULT_CAMPAIGN,
    DRIVE_COLUMNS,
    DRIVE_OPTIONAL,
    PRESS_COLUMNS,
    SOURCE_COLUMN,
    Study,
    campaign_of,
    classify,
    validate,
)
from ingestion.run import ingest_inbox
from tasks.ingest.records import log_ingestion

__all__ = [
    "DEFAULT_CAMPAIGN",
    "DRIVE_COLUMNS",
    "DRIVE_OPTIONAL",
    "PRESS_COLUMNS",
    "SOURCE_COLUMN",
    "FileOutcome",
    "IngestBusyError",
    "IngestError",
    "IngestReport",
    "Status",
    "Study",
    "campaign_of",
    "campaign_table",
    "campaign_table_task",
    "classify",
    "drive_recording",
    "ingest_inbox",
    "ingest_inbox_task",
    "log_ingestion",
    "log_ingestion_task",
    "part_path",
    "read_dataset",
    "recording_table_task",
    "validate",
]


@task(name="ingest-inbox", persist_result=False)
def ingest_inbox_task(
    inbox: str,
    data_root: str,
    dry_run: bool = False,
    settle_seconds: float = 0.0,
    campaign: str | None = None,
) -> IngestReport:
    """The whole inbox in one task: files are processed in order under one lock."""
    return ingest_inbox(
        inbox, data_root, dry_run=dry_run, settle_seconds=settle_seconds, campaign=campaign
    )


@task(name="log-ingestion", persist_result=False)
def log_ingestion_task(report: IngestReport, experiment: str = "ingest-lab-data") -> str:
    return log_ingestion(report, experiment)


@task(name="build-campaign-table", persist_result=False)
def campaign_table_task(data_root: str, study: str, campaign: str) -> str:
    """Concatenate a campaign's parts into one content-addressed Parquet table; its path."""
    from schemas.storage import content_hash, store_table

    table = campaign_table(data_root, study, campaign)
    folder = Path(data_root) / "campaigns" / study / safe_name(campaign)
    return str(store_table(table, folder, content_hash(table)))


@task(name="build-recording-table", persist_result=False)
def recording_table_task(data_root: str, campaign: str, part: str) -> str:
    """One ingested drive recording (`part`, relative to the data root) as a content-addressed
    Parquet recording for the drive study; its path."""
    from schemas.storage import content_hash, store_table

    table = drive_recording(data_root, part)
    folder = Path(data_root) / "campaigns" / Study.drive.value / safe_name(campaign)
    return str(store_table(table, folder, content_hash(table)))

"""Flow `ingest-lab-data`: inbox -> validated Parquet dataset, archive, quarantine, ledger;
one MLflow run per ingestion; optionally the press study for campaigns with new data.

Rules (study by columns, campaign by file name, layout, crash safety): `tasks.ingest`.
Entry point for deployments: `flows/ingest_flow.py:ingest_lab_data`; for the CLI: `run_ingest`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from methods.errors import InputError
from tasks import ingest as ingest_tasks
from tasks.settings import load_settings


class IngestSettings(BaseModel):
    """Settings of one ingestion run (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid")

    inbox: str | None = Field(
        None, description="Folder scanned for new files; empty = <data root>/inbox"
    )
    data_root: str | None = Field(
        None, description="Dataset, archive, quarantine, ledger; empty = GREYLAB_DATA_ROOT"
    )
    dry_run: bool = Field(False, description="Report what would happen; write and move nothing")
    trigger_studies: bool = Field(
        False, description="Run the press study for each press campaign that got new data"
    )
    settle_seconds: float = Field(
        0.0, ge=0, description="Leave files modified this recently (uploads in progress)"
    )
    track: bool = Field(True, description="Log the run to MLflow (counts, hashes, rejects)")
    experiment: str = Field("ingest-lab-data", description="MLflow experiment of the runs")

    def folders(self) -> tuple[Path, Path]:
        """(inbox, data_root) with the documented defaults applied."""
        data_root = Path(self.data_root) if self.data_root else load_settings().data_root
        inbox = Path(self.inbox) if self.inbox else data_root / "inbox"
        return inbox, data_root


@flow(name="ingest-lab-data", log_prints=True)
def ingest_lab_data(settings: IngestSettings | None = None) -> dict[str, Any]:
    settings = settings or IngestSettings()
    inbox, data_root = settings.folders()
    if settings.inbox is None:
        inbox.mkdir(parents=True, exist_ok=True)  # the default inbox may simply not exist yet
    report = ingest_tasks.ingest_inbox_task(
        str(inbox), str(data_root), settings.dry_run, settings.settle_seconds
    )
    print(report.summary())
    run_id = None
    if settings.track and not settings.dry_run:
        run_id = ingest_tasks.log_ingestion_task(report, settings.experiment)
    studies = []
    if settings.trigger_studies and not settings.dry_run:
        studies = [_start_study(study, campaign, data_root) for study, campaign in report.new_data]
    return {**report.to_dict(), "run_id": run_id, "studies": studies}


def _start_study(study: str, campaign: str, data_root: Path) -> dict[str, Any]:
    """The press study on a campaign's concatenated table; a failure is reported, not raised
    (the ingestion itself succeeded)."""
    entry: dict[str, Any] = {"study": study, "campaign": campaign}
    if study != ingest_tasks.Study.press:
        return {**entry, "status": "skipped", "reason": "no study flow is started for drive data"}
    from flows.press_flow import PressStudy, run_press_study

    try:
        path = ingest_tasks.campaign_table_task(str(data_root), study, campaign)
        result = run_press_study(PressStudy(data=path))
    except InputError as exc:
        return {**entry, "status": "failed", "reason": str(exc)}
    return {**entry, "status": "done", "data": path, "parent_run_id": result.get("parent_run_id")}


def run_ingest(settings: IngestSettings | dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the flow once (for `greylab ingest`); returns the report as plain JSON types.

    Keys: inbox, data_root, dry_run, started, finished, counts {ingested, resumed, duplicate,
    quarantined, skipped}, rows, new_data, outcomes, run_id (MLflow), studies.
    """
    settings = IngestSettings.model_validate(settings or {})
    return ingest_lab_data(settings)

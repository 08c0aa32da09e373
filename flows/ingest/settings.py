"""Settings of the ingestion flow `ingest-lab-data`: the single source of the Prefect form, the
flow's parameters and the options of `greylab ingest` (flows/cli_settings.py).

No folder is a setting (docs/trust.md, "Trust model of ingestion"): the worker's configuration names
the inbox and the data root; `greylab ingest --inbox/--data-root` are the command's own options
and configure only the CLI's process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from flows.cli_settings import Cli, lab_form
from ingestion.names import CAMPAIGN_RULE
from runtime.settings import load_settings

CAMPAIGN_PATTERN = f"^{CAMPAIGN_RULE}$"  # the campaign of file names


class IngestSettings(BaseModel):
    """Settings of one ingestion run (the form in the Prefect UI).

    No folder is a parameter: the inbox and the data root come from the worker's
    configuration (`GREYLAB_INBOX`, `GREYLAB_DATA_ROOT`); a dashboard run may only pick a
    campaign (a name) of the files there.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=lab_form)

    campaign: str | None = Field(
        None, pattern=CAMPAIGN_PATTERN, description="Only files of this campaign; empty = all"
    )
    dry_run: bool = Field(False, description="Report what would happen; write and move nothing")
    trigger_studies: bool = Field(
        False,
        description="Run a study for each campaign that got new data, as campaigns.toml in "
        "the data root configures it (no entry: the built-in press study on press data)",
    )
    # a person at a terminal drops a complete file; the scheduled deployment waits for uploads
    settle_seconds: Annotated[float, Cli(default=5.0)] = Field(
        60.0,
        ge=0,
        le=3600,
        description="A file is taken once unchanged for this long (uploads in progress wait; "
        "0: the file is complete)",
    )
    track: bool = Field(True, description="Log the run to MLflow (counts, hashes, rejects)")
    experiment: str = Field(
        "ingest-lab-data", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description="MLflow experiment of the runs",
    )  # fmt: skip

    def folders(self) -> tuple[Path, Path]:
        """(inbox, data_root) from the worker's configuration."""
        settings = load_settings()
        return settings.inbox, settings.data_root

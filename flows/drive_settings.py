"""Settings of the drive study `drive-structure-search`: the single source of the Prefect form,
the flow's parameters and the options of `greylab drive identify` (flows/cli_settings.py)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flows.cli_settings import Cli, explained
from models.drivetrain import REFERENCE_STRUCTURE
from tasks import limits
from tasks.recorder import validate_experiment_name

_CAMPAIGN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class DrivePreset(StrEnum):
    """`reference`: the paper's rotary drive units; `emps`: the prismatic EMPS drive
    (`models.drivetrain.gp.presets`)."""

    reference = "reference"
    emps = "emps"


class DriveSearch(BaseModel):
    """Settings of one structure search (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid")

    data: Annotated[str | None, Cli(path=True)] = Field(
        None, description="Recording (CSV/Parquet) or EMPS .mat; empty = the paper's reference"
    )
    reference_structure: list[str] = Field(
        [str(getattr(k, "value", k)) for k in REFERENCE_STRUCTURE],
        description="True structure of the simulated reference recording",
    )
    noise_percent: float = Field(0.0, ge=0, description="Velocity noise, % of its range")
    reference_seed: int = Field(
        0, ge=0, description="Noise seed of the simulated reference recording"
    )
    validation_data: Annotated[str | None, Cli(path=True)] = Field(
        None,
        description="Recording (CSV/Parquet or EMPS .mat) not used for identification: the "
        "identified model is simulated on it open loop (greylab drive validate)",
    )
    emps_decimate: int = Field(10, ge=1, description="EMPS: keep every k-th sample")
    preset: DrivePreset | None = Field(
        None,
        description=explained(
            "Settings preset; empty = emps for a .mat file, else the paper's", DrivePreset
        ),
    )
    population: int = Field(10, ge=2, description="Individuals per generation")
    generations: int = Field(10, ge=1, description="Generations")
    seed: int = Field(0, ge=0, description="Seed of the search")
    test_fraction: float = Field(0.0, ge=0, lt=0.9, description="Held-out tail for fitness")
    nominals: Annotated[dict[str, float], Cli(name="nominal")] = Field(
        {},
        description="Parameter nominals, name=value (CLI: repeat the option); bounds 50..200 %",
    )
    batch_size: int = Field(0, ge=0, description="Individuals per task; 0 = spread over workers")
    workers: int = Field(2, ge=1, description="Parallel workers")
    resume: Annotated[bool, Cli(name="cache")] = Field(
        True,
        description="Resume from the checkpoint of an identical search (same recording, "
        "settings and greylab code); false (CLI: --no-cache) starts over",
    )
    experiment: str = Field("drive-structure-search", description="MLflow experiment")
    register_model: bool = Field(
        True,
        description="Log the identified model as an MLflow model and register it as "
        "drive-CAMPAIGN; false (CLI: --no-register-model) skips that",
    )
    campaign: str | None = Field(
        None,
        description="Registered model name drive-CAMPAIGN (letters, digits, ._-); empty = "
        "drive-HASH, the first 12 characters of the recording's content hash",
    )

    @field_validator("campaign")
    @classmethod
    def _campaign(cls, value: str | None) -> str | None:
        if value is not None and not _CAMPAIGN.match(value):
            raise ValueError("use 1-64 letters, digits or ._- starting with a letter or digit")
        return value

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)

    @model_validator(mode="after")
    def _limits(self) -> DriveSearch:
        """Population, population x generations and workers within the machine's limits."""
        limits.check("population", self.population, "GREYLAB_MAX_POPULATION")
        limits.check(
            f"population x generations = {self.population} x {self.generations}",
            self.population * self.generations,
            "GREYLAB_MAX_GP_EVALUATIONS",
        )
        limits.check("workers", self.workers, "GREYLAB_MAX_WORKERS")
        return self

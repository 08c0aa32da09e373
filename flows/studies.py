"""The studies greylab runs, in one table (`STUDIES`).

The command line (`greylab <study> …`), `greylab compare --study`, campaigns (which ingested
data starts which study), the resource limits and the parametrised tests iterate over it; a
study that is missing from any of them fails `tests/flows/test_studies.py`. Adding a study is
its folders `flows/<name>/` and `tasks/<name>/`, a deployment and one row here
(docs/ARCHITECTURE.md, "Adding a study").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from flows.drive.settings import DriveSearch
from flows.ingest.settings import IngestSettings
from flows.inverse.settings import InverseStudy
from flows.press.settings import PressStudy
from flows.validation.settings import ModelValidation
from ingestion.rules import Study as DataKind
from tasks.drive.records import DriveRecorder
from tasks.ingest.records import IngestRecorder
from tasks.inverse.records import InverseRecorder
from tasks.press.records import OLD_P_VALUES, P_VALUES, PressRecorder
from tasks.validation.records import ValidationRecorder
from tracking.compare import CompareSpec
from tracking.recorder import Recorder

_TABLE = "the study runs on the campaign's ingested data"
_TWIN = "used only without data (the digital twin / simulated reference recording)"


@dataclass(frozen=True)
class Campaigns:
    """Which ingested data starts the study (`campaigns.toml`), and the settings a campaign
    file cannot set, with the reason (`flows/campaign_studies.py`)."""

    data: DataKind
    fixed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StudySpec:
    """One study: its name (CLI group, `compare --study`, the `greylab.study` tag), its
    commands, its flow's settings model and deployment, what its runs record and how they are
    compared, the resource limits it checks and whether campaigns start it."""

    name: str
    cli: str  # the module whose `register(app)` adds the study's commands (imported by the CLI)
    settings: type[BaseModel]  # the flow's parameter: the Prefect form and the CLI options
    deployment: str  # the flow's name in deployments/prefect.yaml
    recorder: type[Recorder]  # what its runs record
    compare: CompareSpec | None = None  # how `greylab compare --study <name>` lines them up
    limits: tuple[str, ...] = ()  # the GREYLAB_MAX_* variables its settings check
    campaigns: Campaigns | None = None
    products: bool = False  # registers its identified models (`<name>-<label>` in MLflow)


PRESS_RUNS = CompareSpec(
    kind="child",
    lead=(
        "model",
        "verdict",
        "cache",
        "min_alpha",
        "threshold",
        "n_rejections",
        "design",
        "sensors",
        "split",
        "statistic",
        "correction",
        "n_tests",
        "tol",
    ),
    headline="min_alpha",
    short=("run_id", "start", "model", "verdict", "min_alpha", "threshold", "study_run"),
    reference="threshold",
    series=(P_VALUES, OLD_P_VALUES),  # per test; `min_alpha` is their minimum
)
DRIVE_RUNS = CompareSpec(
    kind="parent",
    lead=(
        "best_structure",
        "cache",
        "best_fitness",
        "best_rss",
        "population",
        "generations",
        "seed",
        "test_fraction",
    ),
    headline="best_rss",
    short=("run_id", "start", "best_structure", "best_fitness", "generations", "seed", "cache"),
)
INVERSE_RUNS = CompareSpec(
    kind="child",
    lead=(
        "system",
        "method",
        "dt",
        "max_constraint_violation",
        "tracking_error",
        "error_vs_exact",
        "wall_time_s",
    ),
    headline="max_constraint_violation",
    short=("run_id", "start", "system", "method", "dt", "max_constraint_violation", "study_run"),
)

STUDIES: tuple[StudySpec, ...] = (
    StudySpec(
        "press", "flows.press.cli", PressStudy, "press-uncertainty", PressRecorder, PRESS_RUNS,
        limits=("GREYLAB_MAX_TESTS", "GREYLAB_MAX_MODELS", "GREYLAB_MAX_WORKERS"),
        campaigns=Campaigns(DataKind.press, {
            "data": _TABLE, "twin_truth": _TWIN, "twin_seed": _TWIN}),
        products=True,
    ),
    StudySpec(
        "drive", "flows.drive.cli", DriveSearch, "drive-structure-search", DriveRecorder, DRIVE_RUNS,
        limits=("GREYLAB_MAX_POPULATION", "GREYLAB_MAX_GP_EVALUATIONS", "GREYLAB_MAX_WORKERS",
                "GREYLAB_MAX_DRIVE_SAMPLES", "GREYLAB_MAX_DRIVE_SUBSTEPS",
                "GREYLAB_MAX_DRIVE_WORK"),
        campaigns=Campaigns(DataKind.drive, {
            "data": _TABLE, "reference_structure": _TWIN, "noise_percent": _TWIN,
            "reference_seed": _TWIN}),
        products=True,
    ),
    StudySpec(
        "inverse", "flows.inverse.cli", InverseStudy, "inverse-simulation", InverseRecorder, INVERSE_RUNS,
        limits=("GREYLAB_MAX_INVERSE_STEPS", "GREYLAB_MAX_INVERSE_RUNS", "GREYLAB_MAX_WORKERS"),
    ),
    StudySpec("ingest", "flows.ingest.cli", IngestSettings, "ingest-lab-data", IngestRecorder),
    # a registered press or drive model on new data: one evaluation run per validation (the
    # versions' `validation.*` tags are what `greylab compare --models` shows)
    StudySpec(
        "validation", "flows.validation.cli", ModelValidation, "model-validation",
        ValidationRecorder,
    ),
)  # fmt: skip


def study(name: str) -> StudySpec:
    """The study named `name`; `InputError` listing the studies otherwise."""
    for spec in STUDIES:
        if spec.name == name:
            return spec
    from methods.errors import InputError

    raise InputError(f"unknown study {name!r}; choose one of {[s.name for s in STUDIES]}")


def compared() -> dict[str, CompareSpec]:
    """The studies `greylab compare --study` lines up, by name."""
    return {s.name: s.compare for s in STUDIES if s.compare is not None}

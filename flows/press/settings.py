"""Settings of the press study `press-uncertainty`: the single source of the Prefect form, the
flow's parameters and the options of `greylab press detect` (flows/cli_settings.py)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flows.cli_settings import Cli, Limit, explained, lab_form
from flows.data_refs import checked_data, data_choices
from methods.press.design.sensors import Criterion
from methods.press.uncertainty.splits import SplitKind
from methods.press.uncertainty.tables import Correction, Statistic
from tracking.protocol import validate_experiment_name


class Truth(StrEnum):
    """Friction in the digital twin's joints: M1 none; M2 Coulomb friction of constant
    magnitude; M3 load-dependent Coulomb friction (mu |q|)."""

    M1 = "M1"
    M2 = "M2"
    M3 = "M3"


def _allowed_models() -> list[str]:
    from models.registry import BUILTIN, allowed_models

    return [*BUILTIN, *sorted(allowed_models())]


def _model_choices(schema: dict[str, Any]) -> None:
    """The Prefect form's multi-select: the built-in models and the plugins this worker
    allows (the schema is made where the deployment is served)."""
    schema["items"] = {"type": "string", "enum": _allowed_models()}
    schema["uniqueItems"] = True


def _design_choices(schema: dict[str, Any]) -> None:
    """The design model as a choice of the same models (or empty)."""
    for alternative in schema.get("anyOf", []):
        if alternative.get("type") == "string":
            alternative["enum"] = _allowed_models()


class PressStudy(BaseModel):
    """Settings of one press model-uncertainty study (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=lab_form)

    data: Annotated[str | None, Cli(path=True)] = Field(
        None,
        json_schema_extra=data_choices("press"),
        description="Measurement table: ingested data as campaign:NAME (all its files) or "
        "campaign:NAME@HASH (one file), or a CSV/Parquet file inside the worker's data root; "
        "empty = the digital twin",
    )
    sensor_sheet: Annotated[str | None, Cli(name="sheet", path=True)] = Field(
        None,
        description="Sensor sheet (sensor,sigma_um), a file inside the worker's data root; "
        "empty = sigma from the repeats",
    )
    twin_truth: Truth = Field(
        Truth.M3, description=explained("Friction model of the digital twin (no data)", Truth)
    )
    twin_seed: int = Field(1, ge=0, description="Seed of the digital twin (no data)")
    models: Annotated[
        list[str],
        Cli(name="model", aliases=("--models",),
            note="repeat the option or separate by commas; --models is the same option; "
            "plugins: entry points 'greylab.models', GREYLAB_ALLOWED_MODELS"),
        Limit("GREYLAB_MAX_MODELS"),
    ] = Field(
        ["M1", "M2", "M3"],
        min_length=1,
        json_schema_extra=_model_choices,
        description="Candidate models: the built-in press models M1, M2, M3 and the lab's own "
        "models this worker allows",
    )  # fmt: skip
    design_model: str | None = Field(
        None,
        json_schema_extra=_design_choices,
        description="Model the optimal sensor design uses (one of the allowed models); empty "
        "= the candidate with the most parameters (ties: the last listed)",
    )
    n_sensors: Annotated[
        int | None, Cli(name="sensors", zero_is_none=True, note="all says the same")
    ] = Field(2, ge=1, description="Sensors kept by the optimal design; 0 = all")
    max_sensors: int | None = Field(
        None,
        ge=1,
        description="At most this many sensors (the design may keep fewer; the default "
        "exact count 2 then gives way); empty = no limit",
    )
    budget: float | None = Field(
        None,
        gt=0,
        description="Total cost of the kept sensors at most this (costs: the sensor "
        "sheet's cost column); empty = no budget",
    )
    design_refit: bool = Field(
        False,
        description="Second-order terms of each candidate subset from a fit on that "
        "subset's own data (slower); off = from the all-sensor fit",
    )
    criterion: Criterion = Field(Criterion.E, description=explained("Design criterion", Criterion))
    n_tests: Annotated[int, Cli(name="tests"), Limit("GREYLAB_MAX_TESTS")] = Field(
        50, ge=1, description="Calibration/validation tests per model"
    )
    tol: float = Field(0.05, gt=0, lt=1, description="Family-wise significance level")
    split: SplitKind = Field(
        SplitKind.RANDOM, description=explained("How tests split the data", SplitKind)
    )
    calibration_fraction: float = Field(
        0.5, gt=0, lt=1, description="Share of the data that calibrates (random splits)"
    )
    statistic: Statistic = Field(
        Statistic.DIFFERENCE, description=explained("Test statistic", Statistic)
    )
    correction: Correction = Field(
        Correction.BONFERRONI, description=explained("Multiple-testing correction", Correction)
    )
    paper: bool = Field(
        False,
        description="The paper's test (docs/methods.md §1.7): statistic paper (d'C_cal^-1 d) "
        "with the Bonferroni correction; a statistic left at difference becomes paper, "
        "correction holm is refused. Design, splits, tests and tolerance are the study's (the "
        "paper leaves them to the application)",
    )
    seed: int = Field(0, ge=0, description="Seed of the random splits")
    batch_size: int = Field(25, ge=1, description="Splits per Prefect task")
    experiment: str = Field("press-uncertainty", description="MLflow experiment")
    cache: Annotated[bool, Cli(note="--no-cache recomputes")] = Field(
        True,
        description="Reuse results of identical steps (same table contents, model code and "
        "greylab numerics); off recomputes every step",
    )
    register_model: Annotated[bool, Cli(note="--no-register-model skips it")] = Field(
        True,
        description="Log every fitted model as an MLflow model and register it as "
        "press-MODEL, e.g. press-M3 (a new version per study); off skips that",
    )

    # Flow parameters may come from the dashboard: they name code only through the worker's
    # allow-list (models/registry.py) and stay within the machine's limits (models/limits.py).
    @field_validator("models")
    @classmethod
    def _models(cls, value: list[str]) -> list[str]:
        from models import limits
        from models.registry import check_model_reference

        limits.check("models", len(value), "GREYLAB_MAX_MODELS")
        return [check_model_reference(m) for m in value]

    @field_validator("data")
    @classmethod
    def _data(cls, value: str | None) -> str | None:
        return checked_data(value, "press")  # a dashboard user reads no other file

    @field_validator("sensor_sheet")
    @classmethod
    def _sensor_sheet(cls, value: str | None) -> str | None:
        return checked_data(value, None)

    @field_validator("design_model")
    @classmethod
    def _design_model(cls, value: str | None) -> str | None:
        from models.registry import check_model_reference

        return None if value is None else check_model_reference(value)

    @field_validator("n_sensors", mode="before")
    @classmethod
    def _all_sensors(cls, value: Any) -> Any:
        return None if value == 0 and value is not False else value  # the form's 0 = all

    @field_validator("n_tests")
    @classmethod
    def _n_tests(cls, value: int) -> int:
        from models import limits

        limits.check("n_tests", value, "GREYLAB_MAX_TESTS")
        return value

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)

    @model_validator(mode="after")
    def _at_most(self) -> PressStudy:
        """`max_sensors` with the default exact count (2; the form always sends every field,
        so the default is judged by value) means "at most": the exact count is dropped; any
        other exact count with it is refused (one count rule per design)."""
        if self.max_sensors is None or self.n_sensors is None:
            return self
        if self.n_sensors != 2:
            raise ValueError(
                f"max_sensors (--max-sensors) {self.max_sensors} and n_sensors (--sensors) "
                f"{self.n_sensors}: give one count rule (--sensors all with --max-sensors)"
            )
        self.n_sensors = None
        return self

    @model_validator(mode="after")
    def _paper(self) -> PressStudy:
        """`paper`: the paper's statistic (a statistic at greylab's default, difference, becomes
        paper; the form always sends every field, so the default is judged by value) and its
        Bonferroni correction (holm is refused). The recorded `statistic` is the one used."""
        if not self.paper:
            return self
        self.statistic = Statistic.PAPER
        if self.correction != Correction.BONFERRONI:
            raise ValueError(
                f"paper (--paper) is the paper's test with the Bonferroni correction: got "
                f"correction {self.correction.value} (leave --correction at bonferroni, or "
                "drop --paper)"
            )
        return self

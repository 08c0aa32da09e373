"""Settings of the validation flow `model-validation`: a registered model on new data (the
single source of the Prefect form, the flow's parameter and the options of
`greylab validation run`, flows/cli_settings.py).

Every value may come from a dashboard user (docs/trust.md): the model is a registered name
(`press-…` or `drive-…`) and a version number or alias, from which the flow builds the
`models:/` URI itself (no path, `runs:/`, `file:` or other URI reaches the loader, and loading
runs no code that came with the model: `products.files`); the data follows the rules of every
flow's data (`flows.data_refs`: ingested data by reference, or a file inside the worker's
data folders).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from flows.cli_settings import Cli, explained, lab_form
from flows.data_refs import checked_data
from products.validation import EXPERIMENT
from tracking.protocol import validate_experiment_name

#: a registered name greylab makes (`products.pyfunc.registered_name`): the study, a dash and
#: a label of letters, digits and `._-` that starts and ends with a letter or digit
MODEL_NAME = re.compile(r"^(press|drive)-[A-Za-z0-9](?:[A-Za-z0-9._-]{0,88}[A-Za-z0-9])?$")
#: a version number, or an alias (MLflow's aliases: letters, digits, `_` and `-`)
VERSION = re.compile(r"^(?:[1-9][0-9]{0,8}|[A-Za-z_][A-Za-z0-9_-]{0,62})$")


class ModelKind(StrEnum):
    """press: predictions of a calibrated press model against new measurements (RMSE, R^2,
    share outside the 95 % prediction band); drive: the open-loop simulation of an identified
    drive train against a new recording (velocity and position)."""

    press = "press"
    drive = "drive"


def _quoted(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:75] + "...'"


def _data_choices(schema: dict[str, Any]) -> None:
    """The form's suggestions: the press and drive campaigns ingested on the worker."""
    from ingestion.references import campaign_choices
    from runtime.settings import load_settings

    try:
        root = load_settings().data_root
        choices = [*campaign_choices(root, "press"), *campaign_choices(root, "drive")]
    except Exception:  # no data root yet: no suggestions
        choices = []
    if choices:
        schema["examples"] = choices


def _model_choices(schema: dict[str, Any]) -> None:
    """The form's Model field: the registered greylab models as a choice when the deployment
    is built (`flows.validation.choices`), else free text with the name's pattern."""
    from deployments.serve import building_deployments
    from flows.validation.choices import registered_names

    schema["pattern"] = MODEL_NAME.pattern  # the form refuses a path or URI before submit
    names = registered_names(MODEL_NAME) if building_deployments() else []
    if names:
        schema["enum"] = names
        schema["description"] += "; the choices: the models registered when the form was made"


class ModelValidation(BaseModel):
    """Settings of one validation: which registered model, on which new data (the form in the
    Prefect UI)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=lab_form)

    kind: ModelKind = Field(
        ModelKind.press, description=explained("What kind of model is validated", ModelKind)
    )
    model: str = Field(
        ...,
        max_length=100,
        examples=["press-M3", "drive-emps"],
        json_schema_extra=_model_choices,
        description="Registered model name as the study registered it: press-MODEL (e.g. "
        "press-M3) or drive-CAMPAIGN (e.g. drive-emps)",
    )
    version: str = Field(
        "champion",
        max_length=63,
        description="Version number (e.g. 3), latest, or an alias: champion = the newest "
        "version that passed its study",
    )
    data: Annotated[str, Cli(path=True)] = Field(
        ...,
        max_length=4096,
        json_schema_extra=_data_choices,
        description="New data the model was not fitted on: ingested data as campaign:NAME or "
        "campaign:NAME@HASH, or a file inside the worker's data root (press: measurement "
        "table; drive: recording, or an EMPS .mat record)",
    )
    sensor_sheet: Annotated[str | None, Cli(name="sheet", path=True)] = Field(
        None,
        max_length=4096,
        description="Press only: sensor sheet (sensor,sigma_um), a file inside the worker's "
        "data root; empty = the sigma of the model's fit",
    )
    emps_decimate: int | None = Field(
        None,
        title="EMPS decimation",
        ge=1,
        le=1000,
        description="Drive only, EMPS .mat records: keep every n-th sample; empty = the "
        "model's sample time",
    )
    experiment: str = Field(EXPERIMENT, description="MLflow experiment of the evaluation run")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not MODEL_NAME.fullmatch(value):
            raise ValueError(
                f"{_quoted(value)} is not a registered model name: press-NAME or drive-NAME "
                "with letters, digits and ._- (no path or URI)"
            )
        return value

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not VERSION.fullmatch(value):
            raise ValueError(
                f"{_quoted(value)}: a version number (1, 2, ...) or an alias of letters, "
                "digits, _ and - (e.g. champion)"
            )
        return value

    @field_validator("data")
    @classmethod
    def _data(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        study = kind.value if isinstance(kind, ModelKind) else None
        return str(checked_data(value, study))  # a dashboard user reads no other file

    @field_validator("sensor_sheet")
    @classmethod
    def _sensor_sheet(cls, value: str | None) -> str | None:
        return checked_data(value, None)

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)

    @model_validator(mode="after")
    def _kind_fits(self) -> ModelValidation:
        prefix = self.model.partition("-")[0]
        if prefix != self.kind.value:
            raise ValueError(
                f"model {self.model!r} is a {prefix} model; choose kind {prefix} (or a "
                f"{self.kind.value}-… model)"
            )
        if self.kind is ModelKind.drive and self.sensor_sheet is not None:
            raise ValueError("sensor_sheet: a sensor sheet is for press models only")
        if self.kind is ModelKind.press and self.emps_decimate is not None:
            raise ValueError("emps_decimate: for drive models (EMPS records) only")
        return self

    def model_uri(self) -> str:
        """`models:/<name>/<version>` or `models:/<name>@<alias>` (built from checked parts)."""
        if self.version.isdigit() or self.version == "latest":  # MLflow's newest version
            return f"models:/{self.model}/{self.version}"
        return f"models:/{self.model}@{self.version}"

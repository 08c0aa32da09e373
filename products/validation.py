"""Validation of an identified model on data that was not used to fit it.

`validate_model(uri, data)` loads a greylab model product (`products.pyfunc.load_product`:
`models:/press-M3/1`, `models:/drive-emps/2`, `runs:/<id>/model`), reads the recording or
measurement table, and runs the pure core: `methods.press.uncertainty.prediction.validate_predictions`
(per-sensor metrics, normalised residuals, share outside the 95 % prediction band) or
`models.drivetrain.product.validate` (open-loop simulation, velocity and position metrics).
Data that does not match the model (columns, sensors, sample time, units) is an `InputError`.

`ValidationRecorder.record` logs an evaluation run (tags `greylab.study=validation`,
`greylab.kind=validation`, `greylab.model_kind=<press|drive>`, linked to
the model by `greylab.model_uri` and `greylab.model_run_id`; metrics `<output>.<metric>`;
`validation.json`; figure `figures/validation.png`) and tags every registered version made
by the model's run with `validation.<output>.<metric>` and `validation.run_id`, so
`greylab compare --models` shows the newest validation next to each version.

No Prefect here: a validation is one load and one simulation (well under a minute).
`tasks.validation.tasks.validate_and_record` puts the two together; the `model-validation` flow
runs it as a task and `greylab press|drive validate` call it directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from methods.errors import InputError
from methods.validation import flat_metrics
from schemas.storage import content_hash
from tracking.protocol import RunTracker, mlflow_key
from tracking.recorder import Recorder

EXPERIMENT = "greylab-validation"
#: the metrics copied onto a registered version's tags (all are in the evaluation run)
VERSION_METRICS = ("rmse", "fit", "r2")
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class ValidationOutcome:
    """One validation: which model, on which data, the metrics per output and the core's
    full result (`details`, its `to_dict()`); `run_id` of the evaluation run if tracked."""

    model_uri: str
    kind: str  # press | drive
    data: str
    data_hash: str
    model_run_id: str
    metrics: dict[str, dict[str, float]]
    details: dict[str, Any]
    summary: str
    result: Any = field(repr=False, compare=False)  # PressValidation | DriveValidation
    frame: pd.DataFrame = field(repr=False, compare=False)  # the data as validated
    run_id: str = ""
    versions: tuple[str, ...] = ()  # `name/version` tagged with this validation
    warnings: tuple[str, ...] = ()  # e.g. rows of sensors the model lacks, left out

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `greylab press|drive validate --json`."""
        return {
            "model_uri": self.model_uri, "kind": self.kind, "data": self.data,
            "data_hash": self.data_hash, "model_run_id": self.model_run_id,
            "metrics": self.metrics, "validation": self.details, "run_id": self.run_id,
            "versions": list(self.versions), "warnings": list(self.warnings),
        }  # fmt: skip


def model_uri_of_run(run_id: str, tracker: Any) -> str:
    """The model a study run made: its `greylab.model_uri` tag, else `runs:/<id>/model`."""
    if not _RUN_ID.fullmatch(run_id):
        raise InputError(f"--run {run_id[:80]!r}: an MLflow run id is 32 hexadecimal characters")
    try:
        run = tracker.client.get_run(run_id)
    except Exception:
        raise InputError(
            f"--run {run_id}: no such run in {tracker.settings.tracking_uri}"
        ) from None
    return run.data.tags.get("greylab.model_uri") or f"runs:/{run_id}/model"


def validate_model(
    model_uri: str,
    data: Path,
    *,
    kind: str,
    sheet: Path | None = None,
    emps_decimate: int | None = None,
) -> ValidationOutcome:
    """Load the model at `model_uri` (it must be a `kind` model) and validate it on `data`."""
    from products.pyfunc import load_product

    wrapper = load_product(model_uri)
    found = wrapper.spec["kind"]
    if found != kind:
        raise InputError(
            f"model {model_uri[:200]!r} is a {found} model; use `greylab {found} validate`"
        )
    run_id = str((wrapper.metadata or {}).get("run_id", ""))
    if kind == "drive":
        return validate_drive_model(
            wrapper.model, data, model_uri=model_uri, model_run_id=run_id,
            emps_decimate=emps_decimate,
        )  # fmt: skip
    from methods.press.uncertainty.prediction import validate_predictions
    from schemas.press import load_press_table, load_sensor_sheet

    frame = load_press_table(data)
    sigma = dict(wrapper.spec["fit"]["sigma"])  # the fit's, a sheet overrides per sensor
    if sheet is not None:
        sigma |= load_sensor_sheet(sheet, sensors=sorted(frame["sensor"].astype(str).unique()))
    result = validate_predictions(
        wrapper.model, wrapper.parameters, wrapper.covariance, sigma, frame
    )
    outcome = _outcome(model_uri, "press", data, frame, result, run_id)
    return replace(outcome, warnings=_left_out(frame, result.sensors, data))


def _left_out(frame: pd.DataFrame, validated: Any, data: Path) -> tuple[str, ...]:
    """A warning naming the sensors of the table that the validation did not use (the model
    lacks them, or they have no sigma), with their row count: never dropped silently."""
    counts = frame["sensor"].astype(str).value_counts()
    unused = [s for s in counts.index if s not in set(validated)]
    if not unused:
        return ()
    shown = ", ".join(f"{s!r} ({int(counts[s])} rows)" for s in sorted(unused)[:10])
    more = f" and {len(unused) - 10} more" if len(unused) > 10 else ""
    return (
        f"{str(data)[:200]}: rows of sensor(s) {shown}{more} not validated: the model predicts "
        f"only {list(validated)[:10]} (or the sensor has no sigma)",
    )


def validate_drive_model(
    model: Any,
    data: Path,
    *,
    model_uri: str,
    model_run_id: str = "",
    emps_decimate: int | None = None,
) -> ValidationOutcome:
    """Open-loop validation of a `DriveModel` on a recording; an EMPS `.mat` record is loaded
    at the model's sample time (or every `emps_decimate`-th sample)."""
    from models.drivetrain.product import validate
    from schemas.drive import load_drive_recording, load_emps

    if data.suffix.lower() == ".mat":
        if model.units != "prismatic":
            raise InputError(
                f"{data}: an EMPS record is a prismatic drive (force, m/s, m); the model is "
                f"{model.units}"
            )
        if emps_decimate is None:
            raw = load_emps(data)
            emps_decimate = max(1, round(model.dt / float(raw["t_s"].diff().median())))
        frame = load_emps(data, decimate=emps_decimate)
    else:
        frame = load_drive_recording(data)
    result = validate(model, frame, source=str(data))
    return _outcome(model_uri, "drive", data, frame, result, model_run_id)


def _outcome(
    uri: str, kind: str, data: Path, frame: pd.DataFrame, result: Any, run_id: str
) -> ValidationOutcome:
    return ValidationOutcome(
        model_uri=uri, kind=kind, data=str(data), data_hash=content_hash(frame),
        model_run_id=run_id, metrics=result.metrics, details=result.to_dict(),
        summary=result.summary(), result=result, frame=frame,
    )  # fmt: skip


class ValidationRecorder(Recorder):
    """The evaluation run of one validation (experiment `greylab-validation` by default).

    Every evaluation run, whoever starts it (`greylab press|drive validate`, the
    `model-validation` flow, the drive flow's `validation_data`), is tagged
    `greylab.study=validation` (the study registry's name: `greylab compare --study
    validation` lines them up) and `greylab.model_kind=<press|drive>`; runs recorded before
    the validation flow existed carry `greylab.study=<press|drive>` instead."""

    study = "validation"
    run_name = "validation"

    def __init__(self, kind: str, experiment: str = EXPERIMENT, tracker: RunTracker | None = None):
        super().__init__(experiment, tracker)
        self.kind = kind

    def record(
        self, outcome: ValidationOutcome, *, tags: dict[str, str] | None = None
    ) -> ValidationOutcome:
        """Log `outcome` (with `tags` on the run, e.g. the Prefect flow run's) and tag the
        model's registered versions; returns it with `run_id` and the tagged `versions`."""
        settings = {"model_uri": outcome.model_uri, "data": outcome.data, "kind": outcome.kind}
        with self.session(settings, tags=tags) as run_id:
            run = self.run
            run.tags({"greylab.kind": "validation", "greylab.model_kind": outcome.kind,
                      "greylab.model_uri": outcome.model_uri,
                      "greylab.model_run_id": outcome.model_run_id})  # fmt: skip
            self.tracker.log_dataset(
                run_id, outcome.data, description=f"validation:{outcome.data}",
                name=f"{outcome.kind}-validation", frame=outcome.frame, digest=outcome.data_hash,
            )  # fmt: skip
            run.metrics(flat_metrics(outcome.metrics) | _extra_metrics(outcome))
            run.json(outcome.details, "validation.json")
            if outcome.kind == "press":
                run.table(outcome.result.residuals, "residuals.csv")
            run.figure(validation_figure(outcome), "figures/validation.png")
        versions = self._tag_versions(outcome, run_id)
        return replace(outcome, run_id=run_id, versions=tuple(versions))

    def _tag_versions(self, outcome: ValidationOutcome, run_id: str) -> list[str]:
        tags = {
            mlflow_key(f"validation.{out}.{key}"): f"{values[key]:.6g}"
            for out, values in outcome.metrics.items()
            for key in VERSION_METRICS
            if key in values
        }
        tags |= {"validation.run_id": run_id, "validation.data_hash": outcome.data_hash}
        r2 = ", ".join(f"{k.removeprefix('validation.').removesuffix('.r2')} {v}"
                       for k, v in tags.items() if k.endswith(".r2"))  # fmt: skip
        section = (f"Validation: R^2 {r2 or '-'} on data {outcome.data_hash[:12]} "
                   f"(run {run_id}; every metric in the tags validation.*)")  # fmt: skip
        describe = getattr(self.tracker, "describe_model_version", None)
        tagged = []
        for name, version in self.tracker.model_versions(outcome.model_run_id):
            self.tracker.set_model_version_tags(name, version, tags, replace_prefix="validation.")
            if callable(describe):  # the version page shows it above the fold
                describe(name, version, section)
            tagged.append(f"{name}/{version}")
        return tagged


def _extra_metrics(outcome: ValidationOutcome) -> dict[str, float]:
    """Press: the normalised residuals and the 95 % band share per sensor and overall."""
    if outcome.kind != "press":
        return {}
    result = outcome.result
    extra = {"outside_band_all": float(result.outside_band_all)}
    for sensor in result.sensors:
        extra[f"{sensor}.outside_band"] = float(result.outside_band[sensor])
        extra[f"{sensor}.normalised_mean"] = float(result.normalised_mean[sensor])
        extra[f"{sensor}.normalised_std"] = float(result.normalised_std[sensor])
    return extra


def validation_figure(outcome: ValidationOutcome) -> Any:
    """Measured vs predicted (press: per sensor with the 95 % band; drive: velocity and
    position over time)."""
    if outcome.kind == "press":
        from methods.press.plots import validation_figure

        return validation_figure(outcome.result)
    return outcome.result.figure()

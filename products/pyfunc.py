"""Identified models as products: MLflow pyfunc models a lab loads without greylab's flows.

`mlflow.pyfunc.load_model("models:/press-M3/1").predict(frame)` needs only the installed
package: the model folder holds `spec.json` (everything to rebuild the model: for the press
the friction model's name, estimates, covariance, sensor sigma and the 95 % confidence
ellipsoid; for the drive train `models.drivetrain.product.DriveModel.to_dict()`) and a
three-line `model code` file that builds the wrapper below ("models from code": nothing is
unpickled). Neither wrapper imports Prefect.

Press (`PressPyfunc`), input columns: `force_N` (float: the ordered force scenario, one row per
step in order; with `step` the rows may come in any order and repeat per sensor), optional
`step` (int) and `sensor` (str, restricts the output to those sensors). MLflow's schema check
refuses an int64 `force_N` (not safely convertible): pass floats (`10e3`, `.astype(float)`). Output, one row per (step,
sensor): `step`, `force_N`, `sensor`, `displacement_um` (prediction) and `std_um` (its
standard deviation from the parameter covariance, delta method).

Drive (`DrivePyfunc`), input columns: `t_s` (uniform, the model's sample time), `torque_Nm`
(force for a prismatic drive); optional `velocity_rad_s`, `position_rad`: their first sample
is the initial state (else rest at 0). Output: `t_s`, `velocity_rad_s`, `position_rad`
simulated open loop.

Registered names a lab can guess: `press-<model>` (`press-M3`; a plugin reference
`pkg.mod:attr` becomes `press-pkg.mod.attr`) and `drive-<campaign>` (default: the first 12
characters of the recording's content hash).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

from methods.errors import InputError

SPEC_FILE = "spec.json"
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_WRAPPERS = {"press": "PressPyfunc", "drive": "DrivePyfunc"}
#: input columns a caller may leave out (the signature marks them optional)
OPTIONAL_INPUTS = {"press": ("step", "sensor"), "drive": ("velocity_rad_s", "position_rad")}
_CODE = (
    "from mlflow.models import set_model\nfrom products.pyfunc import {cls}\n\nset_model({cls}())\n"
)


def registered_name(study: str, label: str) -> str:
    """`press-M3`, `drive-emps`: the study and a label reduced to letters, digits and `._-`
    (at most 100 characters; a registry name is also a URI path segment)."""
    cleaned = _NAME_CHARS.sub(".", str(label)).strip(".-_")[:90].rstrip(".-_")
    if not cleaned:
        raise InputError(f"model name label {str(label)[:80]!r}: needs a letter or digit")
    return f"{study}-{cleaned}"


def press_spec(model: str, fit: Any, *, all_sensors: list[str]) -> dict[str, Any]:
    """What a press model product needs: the fit (`ParameterFit.to_dict()`), the model's
    sensors (all of them can be predicted) and the 95 % confidence ellipsoid."""
    return {
        "kind": "press",
        "model": model,
        "fit": fit.to_dict(),
        "sensors": list(all_sensors),
        "ellipsoid": fit.ellipsoid(0.95).to_dict(),
    }


# -- wrappers (loaded by MLflow in the lab's process) -------------------------------------
class _Spec(PythonModel):
    spec: dict[str, Any]
    #: set by `load_product`: the model's MLflow metadata (version tags at logging time) and
    #: `run_id`, the run that logged it
    metadata: dict[str, Any] | None = None

    def load_context(self, context: Any) -> None:
        self.spec = json.loads(Path(context.artifacts["spec"]).read_text(encoding="utf-8"))
        self.setup()

    def setup(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class PressPyfunc(_Spec):
    """The calibrated press model: displacement and its standard deviation per step and
    sensor for an ordered force scenario (see module docstring)."""

    def setup(self) -> None:
        from models.registry import resolve_model

        self.model = resolve_model(self.spec["model"])
        fit = self.spec["fit"]
        self.parameters = dict(fit["parameters"])
        covariance = [[np.nan if x is None else x for x in row] for row in fit["covariance"]]
        self.covariance = np.asarray(covariance, dtype=float)

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        from methods.press.uncertainty.prediction import predict_displacements

        steps, forces = press_scenario(model_input)
        sensors = _requested_sensors(model_input, list(self.model.sensors))
        prediction = predict_displacements(
            self.model, self.parameters, self.covariance, forces, sensors
        )
        n_q, n_s = prediction.mean.shape
        return pd.DataFrame(
            {
                "step": np.repeat(steps, n_s),
                "force_N": np.repeat(forces, n_s),
                "sensor": np.tile(np.array(sensors, dtype=object), n_q),
                "displacement_um": prediction.mean.ravel(),
                "std_um": prediction.std.ravel(),
            }
        )


class DrivePyfunc(_Spec):
    """The identified drive train: open-loop velocity and position for a torque record."""

    def setup(self) -> None:
        from models.drivetrain.product import DriveModel

        self.model = DriveModel.from_dict(self.spec["model"])

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> pd.DataFrame:
        frame = drive_input(model_input, self.model.dt)
        velocity0 = float(frame["velocity_rad_s"].iloc[0]) if "velocity_rad_s" in frame else 0.0
        position0 = float(frame["position_rad"].iloc[0]) if "position_rad" in frame else 0.0
        velocity, position = self.model.simulate(
            frame["torque_Nm"].to_numpy(float), velocity0=velocity0, position0=position0
        )
        return pd.DataFrame(
            {"t_s": frame["t_s"].to_numpy(float), "velocity_rad_s": velocity,
             "position_rad": position}
        )  # fmt: skip


def press_scenario(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(steps, forces) of a press input table: one force per step, steps in order."""
    force_column = next((c for c in ("force_N", "force_setpoint_N") if c in frame), None)
    if force_column is None:
        raise InputError(f"press input: needs a column force_N; it has {list(frame.columns)[:20]}")
    forces = pd.to_numeric(frame[force_column], errors="coerce").to_numpy(float)
    if forces.size == 0:
        raise InputError("press input: no rows; give one force_N per step of the scenario")
    if not np.isfinite(forces).all():
        bad = int(np.argmin(np.isfinite(forces)))
        raise InputError(f"press input: {force_column} must be finite numbers (row {bad})")
    if "step" not in frame:
        return np.arange(forces.size), forces
    by_step = pd.DataFrame({"step": frame["step"].to_numpy(), "force": forces}).groupby("step")
    spread = by_step["force"].agg(lambda f: float(np.ptp(f)))
    if (spread > 1e-9 * max(1.0, float(np.abs(forces).max()))).any():
        step = spread.idxmax()
        raise InputError(f"press input: step {step} has different forces; give one per step")
    first = by_step["force"].first()
    return first.index.to_numpy(), first.to_numpy(float)


def _requested_sensors(frame: pd.DataFrame, known: list[str]) -> list[str]:
    if "sensor" not in frame:
        return known
    asked = list(dict.fromkeys(frame["sensor"].astype(str)))
    unknown = [s for s in asked if s not in known]
    if unknown:
        raise InputError(f"press input: sensor(s) {unknown[:5]} not in the model; it has {known}")
    return asked


def drive_input(frame: pd.DataFrame, dt: float) -> pd.DataFrame:
    """A drive input table checked against the model's sample time `dt`."""
    missing = [c for c in ("t_s", "torque_Nm") if c not in frame]
    if missing:
        raise InputError(
            f"drive input: lacks column(s) {missing}; it has {list(frame.columns)[:20]}"
        )
    data = frame.apply(pd.to_numeric, errors="coerce") if len(frame) else frame
    columns = [c for c in ("t_s", "torque_Nm", "velocity_rad_s", "position_rad") if c in data]
    values = data[columns].to_numpy(float)
    if len(values) < 2:
        raise InputError(f"drive input: needs at least 2 rows, got {len(values)}")
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        row, col = (int(i) for i in bad[0])
        raise InputError(f"drive input: column {columns[col]} row {row} is not a finite number")
    step = np.diff(values[:, 0])
    from models.drivetrain.product import DT_RTOL  # the core's tolerance, one definition

    if np.max(np.abs(step - dt)) > DT_RTOL * dt:
        worst = int(np.argmax(np.abs(step - dt)))
        raise InputError(
            f"drive input: the model's sample time is {dt:g} s, but t_s steps by "
            f"{float(step[worst]):g} s from row {worst} to {worst + 1}; give a uniform "
            "recording on the model's grid (resample it)"
        )
    return data[columns].reset_index(drop=True)


# -- saving ------------------------------------------------------------------------------
@contextmanager
def saved_pyfunc(
    spec: Mapping[str, Any], *, input_example: pd.DataFrame, metadata: Mapping[str, Any]
) -> Iterator[Path]:
    """The spec saved as an MLflow pyfunc model in a temporary folder (removed afterwards);
    the model's metadata: `metadata` and, for the press, the 95 % confidence ellipsoid."""
    import mlflow.pyfunc

    kind = str(spec["kind"])
    wrapper = _WRAPPERS[kind]
    plain = _plain(spec)
    with tempfile.TemporaryDirectory(prefix="greylab-model-") as tmp:
        root = Path(tmp)
        (root / SPEC_FILE).write_text(json.dumps(plain, allow_nan=False), encoding="utf-8")
        code = root / f"{kind}_model.py"
        code.write_text(_CODE.format(cls=wrapper), encoding="utf-8")
        model = (PressPyfunc if kind == "press" else DrivePyfunc)()
        model.spec = plain
        model.setup()
        output = model.predict(None, input_example)
        logging.getLogger("mlflow.pyfunc").setLevel(logging.WARNING)  # no INFO on the console
        mlflow.pyfunc.save_model(
            root / "model",
            python_model=str(code),
            artifacts={"spec": str(root / SPEC_FILE)},
            signature=_signature(input_example, output, OPTIONAL_INPUTS[kind]),
            input_example=input_example,
            metadata={**metadata, **{k: plain[k] for k in ("ellipsoid",) if k in plain}},
            pip_requirements=_requirements(),
        )
        yield root / "model"


def _plain(obj: Any) -> Any:
    """JSON-safe copy: non-finite floats become None (strict JSON has no NaN)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, float | np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


#: MLflow column types of the optional inputs (declared even when an example lacks them:
#: MLflow drops undeclared columns silently, and a sensor or an initial state would be ignored)
_OPTIONAL_TYPES = {"step": "long", "sensor": "string", "velocity_rad_s": "double",
                   "position_rad": "double"}  # fmt: skip


def _signature(example: pd.DataFrame, output: pd.DataFrame, optional: tuple[str, ...]) -> Any:
    from mlflow.models import ModelSignature, infer_signature
    from mlflow.types import ColSpec, Schema

    with warnings.catch_warnings():  # the hint on integer columns: `step` is an int by design
        warnings.simplefilter("ignore", UserWarning)
        inferred = infer_signature(example, output)
    given = {c.name: c.type for c in inferred.inputs.inputs}
    columns: list[Any] = [ColSpec(t, n, required=n not in optional) for n, t in given.items()]
    columns += [ColSpec(_OPTIONAL_TYPES[n], n, required=False) for n in optional if n not in given]
    return ModelSignature(inputs=Schema(columns), outputs=inferred.outputs)


def _requirements() -> list[str]:
    """The numerical stack at the installed versions (greylab itself is installed from the
    project: `pip install -e .`, it is not on PyPI)."""
    from importlib.metadata import PackageNotFoundError, version

    pins = []
    for package in ("numpy", "scipy", "pandas", "casadi", "mlflow"):
        try:
            pins.append(f"{package}=={version(package)}")
        except PackageNotFoundError:  # pragma: no cover - part of the install
            continue
    return pins


def load_product(model_uri: str) -> Any:
    """The wrapper of a logged or registered greylab model (`models:/press-M3/1`,
    `runs:/<id>/model`, a model folder), rebuilt by greylab from the folder's `MLmodel` and
    `spec.json` (`products.files`): no code that came with the folder or the store runs,
    and a press spec's plugin model must be allowed as a flow parameter's. Its `spec` says what
    it is, its `metadata` which run logged it (`run_id`) and on which data
    (`greylab.data_hash`). `models:/` URIs resolve in `MLFLOW_TRACKING_URI`, else in greylab's
    default store under `GREYLAB_HOME` (`runtime.settings`). InputError when the URI names
    nothing loadable or no greylab model; `products.files.StoreUnreadable` when the
    store itself fails."""
    from products import files

    # greylab's store, as the studies use it; set through the environment only when the
    # caller has not chosen one, and restored (no process-wide MLflow state is left behind)
    chosen, uri = files.tracking_environment()
    if not chosen:
        os.environ["MLFLOW_TRACKING_URI"] = uri
    try:
        with files.local_model_folder(model_uri) as folder:
            mlmodel = files.read_mlmodel(folder, model_uri)
            spec = files.read_spec(files.spec_path(folder, mlmodel, model_uri), model_uri)
    finally:
        if not chosen:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
    wrapper = PressPyfunc() if spec["kind"] == "press" else DrivePyfunc()
    wrapper.spec = spec
    wrapper.setup()
    if spec["kind"] == "press":
        files.check_model_parameters(wrapper.model, spec, model_uri)
    found = mlmodel.get("metadata")
    extra: dict[str, Any] = found if isinstance(found, dict) else {}
    run_id = mlmodel.get("run_id") or extra.get("greylab.run_id", "")
    wrapper.metadata = {**extra, "run_id": str(run_id or "")}
    return wrapper

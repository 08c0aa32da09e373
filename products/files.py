"""Loading a greylab model product WITHOUT running code that came with it.

An MLflow pyfunc folder holds code (`press_model.py`, a loader module, pickles) that
`mlflow.pyfunc.load_model` executes. greylab's own commands never go through it: they read
the folder's `MLmodel` (YAML, `yaml.safe_load`) and the `spec.json` artifact it names (JSON,
size-limited, checked field by field) and rebuild the model with greylab's own classes
(`products.pyfunc.PressPyfunc` / `DrivePyfunc`). A `models:/` or `runs:/` URI is first
downloaded as files (`mlflow.artifacts.download_artifacts`, nothing is imported). A press
spec's `model` passes the same gate as a flow parameter (`models.registry.check_model_reference`:
built-ins, entry points, `GREYLAB_ALLOWED_MODELS`, references the CLI user typed) before
anything is imported. A lab that trusts a folder can still call `mlflow.pyfunc.load_model`.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from methods.errors import InputError

MAX_SPEC_BYTES = 20_000_000  # a spec is a few kB; a drive spec with history well below this
MAX_MLMODEL_BYTES = 2_000_000  # MLmodel with its signature and metadata: a few kB
#: MLflow error codes of a URI that names nothing (the user's input); any other code, or a
#: database failure inside the message, is the store's failure
_USER_ERRORS = ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE", "NOT_FOUND", "BAD_REQUEST")
_DATABASE_FAILURE = re.compile(r"DatabaseError|OperationalError|disk image is malformed|"
                               r"file is not a database", re.IGNORECASE)  # fmt: skip


class StoreUnreadable(RuntimeError):
    """The MLflow store itself failed (not the user's URI): an infrastructure failure."""


def _say(uri: str) -> str:
    return f"model {uri[:200]!r}"


@contextmanager
def local_model_folder(model_uri: str) -> Iterator[Path]:
    """The model's files in a local folder: a local path as it is, a `models:/`, `runs:/`
    or other artifact URI downloaded into a temporary folder (removed afterwards)."""
    if "://" not in model_uri and ":/" not in model_uri:
        folder = Path(model_uri)
        try:
            exists = folder.is_dir()
        except OSError as exc:  # e.g. a name too long for the file system
            raise InputError(f"{_say(model_uri)}: cannot be loaded ({exc.strerror})") from None
        if not exists:
            raise InputError(f"{_say(model_uri)}: cannot be loaded (no such model folder)")
        yield folder
        return
    import mlflow.artifacts
    from mlflow.exceptions import MlflowException

    with tempfile.TemporaryDirectory(prefix="greylab-product-") as tmp:
        try:
            local = mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=tmp)
        except MlflowException as exc:
            if exc.error_code not in _USER_ERRORS or _DATABASE_FAILURE.search(str(exc)):
                raise StoreUnreadable(
                    f"MLflow store cannot be read while loading {_say(model_uri)}: {exc}"[:600]
                ) from None
            text = f"{_say(model_uri)}: cannot be loaded ({type(exc).__name__}: {exc})"
            raise InputError(text[:600]) from None
        except (OSError, ValueError) as exc:
            text = f"{_say(model_uri)}: cannot be loaded ({type(exc).__name__}: {exc})"
            raise InputError(text[:600]) from None
        except Exception as exc:  # the store's database or server failed
            raise StoreUnreadable(
                f"MLflow store cannot be read while loading {_say(model_uri)}: "
                f"{type(exc).__name__}: {exc}"[:600]
            ) from None
        yield Path(local)


def read_mlmodel(folder: Path, model_uri: str) -> dict[str, Any]:
    """The folder's `MLmodel` as plain data (safe YAML: no objects constructed)."""
    import yaml

    path = folder / "MLmodel"
    if not path.is_file():
        raise InputError(f"{_say(model_uri)}: cannot be loaded (no MLmodel file in the folder)")
    if path.stat().st_size > MAX_MLMODEL_BYTES:
        raise InputError(
            f"{_say(model_uri)}: MLmodel has {path.stat().st_size} bytes (at most "
            f"{MAX_MLMODEL_BYTES}; greylab writes a few kB)"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"{_say(model_uri)}: MLmodel is not readable YAML ({exc})"[:600]) from None
    if not isinstance(data, dict):
        raise InputError(f"{_say(model_uri)}: MLmodel is not a mapping")
    return data


def spec_path(folder: Path, mlmodel: dict[str, Any], model_uri: str) -> Path:
    """The `spec` artifact the pyfunc flavor names; it must stay inside the folder."""
    flavor = (mlmodel.get("flavors") or {}).get("python_function")
    artifacts = flavor.get("artifacts") if isinstance(flavor, dict) else None
    entry = artifacts.get("spec") if isinstance(artifacts, dict) else None
    relative = entry.get("path") if isinstance(entry, dict) else None
    if not isinstance(relative, str):
        raise InputError(f"{_say(model_uri)}: not a greylab press or drive model (no spec)")
    root = folder.resolve()
    path = (root / relative).resolve()
    if root not in path.parents or not path.is_file():
        raise InputError(
            f"{_say(model_uri)}: its spec {relative[:200]!r} is not a file inside the folder"
        )
    return path


def read_spec(path: Path, model_uri: str) -> dict[str, Any]:
    """`spec.json`, parsed as strict JSON and checked for what greylab needs."""
    size = path.stat().st_size
    if size > MAX_SPEC_BYTES:
        raise InputError(
            f"{_say(model_uri)}: spec.json has {size} bytes (at most {MAX_SPEC_BYTES})"
        )
    try:
        spec = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{_say(model_uri)}: spec.json is not valid JSON ({exc})"[:600]) from None
    if not isinstance(spec, dict):
        raise InputError(f"{_say(model_uri)}: spec.json must hold a JSON object")
    kind = spec.get("kind")
    if kind not in ("press", "drive"):
        what = "has no field 'kind'" if "kind" not in spec else f"kind {str(kind)[:40]!r}"
        raise InputError(f"{_say(model_uri)}: spec.json {what}; expected 'press' or 'drive'")
    if kind == "press":
        check_press_spec(spec, model_uri)
    elif not isinstance(spec.get("model"), dict):
        raise InputError(f"{_say(model_uri)}: spec.json field 'model' must be an object")
    return spec


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def check_press_spec(spec: dict[str, Any], model_uri: str) -> None:
    """Field by field: `model` (allowed reference), `fit.parameters`, `fit.covariance`,
    `fit.sigma`; imports nothing except an allowed model."""
    from models.registry import check_model_reference

    where = f"{_say(model_uri)}: spec.json"
    model = spec.get("model")
    if not isinstance(model, str):
        raise InputError(f"{where} field 'model' must be a model name")
    try:
        check_model_reference(model)
    except InputError as exc:
        raise InputError(
            f"{where} names model {model[:120]!r}, which is not allowed here: {exc} (the CLI "
            "allows a reference given with --allow-model)"
        ) from None
    fit = spec.get("fit")
    if not isinstance(fit, dict):
        raise InputError(f"{where} field 'fit' must be an object")
    parameters, sigma = fit.get("parameters"), fit.get("sigma")
    for name, value in (("fit.parameters", parameters), ("fit.sigma", sigma)):
        if not isinstance(value, dict) or not all(_finite(v) for v in value.values()):
            raise InputError(f"{where} field {name!r} must map names to finite numbers")
    covariance = fit.get("covariance")
    n = len(parameters or {})
    if not (isinstance(covariance, list) and len(covariance) == n and all(
        isinstance(row, list) and len(row) == n and all(x is None or _number(x) for x in row)
        for row in covariance
    )):  # fmt: skip
        raise InputError(f"{where} field 'fit.covariance' must be a {n} x {n} list of numbers")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)


def check_model_parameters(model: Any, spec: dict[str, Any], model_uri: str) -> None:
    """The fitted parameters are the model's (a spec for another model is refused)."""
    fitted = set(spec["fit"]["parameters"])
    expected = set(getattr(model, "parameters", {}) or {})
    if fitted != expected:
        raise InputError(
            f"{_say(model_uri)}: spec.json fits parameters {sorted(fitted)[:10]}, but model "
            f"{spec['model'][:120]!r} has {sorted(expected)[:10]}"
        )


def tracking_environment() -> tuple[bool, str]:
    """(whether the caller chose `MLFLOW_TRACKING_URI`, the URI to use)."""
    from runtime.settings import load_settings

    chosen = "MLFLOW_TRACKING_URI" in os.environ
    return chosen, os.environ.get("MLFLOW_TRACKING_URI") or load_settings().tracking_uri

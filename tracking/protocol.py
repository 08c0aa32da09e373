"""The narrow tracker interface every recorder writes through, and how values and keys are
stored (the same for MLflow and the in-memory tracker).

`RunTracker` is implemented by `tracking.mlflow_tracker.Tracker` (MLflow) and
`tracking.memory.InMemoryTracker` (tests, and users who want a study's records without a
store). This module imports neither mlflow nor matplotlib.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from runtime.provenance import git_commit

PARAM_VALUE_LIMIT = 6000


def finite(value: float) -> float:
    """A metric value as stored: NaN kept, +-inf clamped to +-1e308 (MLflow backends differ)."""
    if math.isinf(value):
        return 1e308 if value > 0 else -1e308
    return float(value)


def param_text(value: Any) -> str:
    """A param value as stored: strings as they are, anything else as JSON, truncated."""
    return (value if isinstance(value, str) else json.dumps(value))[:PARAM_VALUE_LIMIT]


def run_tags(study: str, parent_run_id: str | None, tags: Mapping[str, str] | None) -> dict:
    """The tags every run starts with (study, parent/child, commit) plus `tags`."""
    all_tags = {
        "greylab.study": study,
        "greylab.kind": "child" if parent_run_id else "parent",
        "greylab.commit": git_commit(),
        **(tags or {}),
    }
    if parent_run_id:
        all_tags["mlflow.parentRunId"] = parent_run_id
    return all_tags


class RunTracker(Protocol):
    """What a recorder needs from a tracking store (runs by id; thread-safe)."""

    def ensure_store(self) -> None: ...
    def start_run(
        self,
        experiment: str,
        name: str,
        *,
        study: str,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str: ...
    def end_run(self, run_id: str, *, failed: bool = False) -> None: ...
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None: ...
    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None: ...
    def log_metrics(self, run_id: str, metrics: Mapping[str, float], *, step: int = 0) -> None: ...
    def log_series(
        self, run_id: str, key: str, values: Iterable[float], *, start: int = 0
    ) -> None: ...
    def log_json(self, run_id: str, obj: Any, artifact_file: str) -> None: ...
    # `figure`: a matplotlib Figure, or `runtime.figures.Pixels` (drawn already, after the
    # answer on two processes: save them as the PNG without drawing again)
    def log_figure(self, run_id: str, figure: Any, artifact_file: str) -> None: ...
    def log_table(self, run_id: str, frame: pd.DataFrame, artifact_file: str) -> None: ...
    def log_dataset(
        self,
        run_id: str,
        path: str,
        *,
        description: str,
        name: str,
        frame: pd.DataFrame | None = None,
        digest: str | None = None,
    ) -> str: ...
    def log_model(self, run_id: str, directory: Path, artifact_path: str = "model") -> str: ...
    def register_model(
        self, name: str, source: str, run_id: str, tags: Mapping[str, Any], description: str
    ) -> str: ...
    def set_model_version_tags(
        self, name: str, version: str, tags: Mapping[str, Any], *, replace_prefix: str = ""
    ) -> None: ...
    def model_versions(self, run_id: str) -> list[tuple[str, str]]: ...
    def ui_hint(self) -> str: ...


MAX_KEY = 250  # MLflow's limit on a metric, param or tag key
_KEY_BAD = re.compile(r"[^\w.\- /:]")  # MLflow's key characters (POSIX servers)
ORIGINAL_KEY_TAG = "greylab.key."  # + the logged key: the name it stands for


def mlflow_key(name: Any) -> str:
    """`name` (a sensor, model or campaign name from lab content, inside a key) as a key
    MLflow accepts: other characters become `_`, no path-like form (`..`, leading or double
    `/`, `.`), at most 250 characters (a cut key ends in 8 hex digits of the original)."""
    text = _KEY_BAD.sub("_", str(name))
    if posixpath.normpath(text) != text or text.startswith(("/", "..")):
        text = text.replace("/", "_")  # no slash left: only "", ".", ".." and "..x" remain
    if text in ("", ".") or text.startswith(".."):
        text = "_" + text
    if len(text) > MAX_KEY:
        digest = hashlib.sha256(str(name).encode("utf-8", "replace")).hexdigest()[:8]
        text = f"{text[: MAX_KEY - 9]}_{digest}"
    return text


def mlflow_keys(values: Mapping[Any, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(`values` with MLflow-safe keys, {safe key: original} for every key that changed);
    two originals that clean to the same key are told apart by a hash suffix."""
    safe: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    for key, value in values.items():
        name = mlflow_key(key)
        if name in safe and name != str(key):
            digest = hashlib.sha256(str(key).encode("utf-8", "replace")).hexdigest()[:8]
            name = f"{name[: MAX_KEY - 9]}_{digest}"
        if name != str(key):
            renamed[name] = str(key)
        safe[name] = value
    return safe, renamed


_EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+=@-]{0,99}$")


def validate_experiment_name(name: str) -> str:
    """An MLflow experiment name greylab may create: 1-100 characters of letters, digits,
    space and `._+=@-`, starting with a letter or digit, no `..`. It becomes a folder of the
    artifact root, so path separators and `..` (which would write outside the store) are
    refused. Returns the name; raises `InputError` naming the problem."""
    from methods.errors import InputError

    text = name if isinstance(name, str) else ""
    if not _EXPERIMENT_NAME.match(text) or ".." in text:
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:75] + "...'"
        raise InputError(
            f"experiment {shown}: use 1-100 letters, digits, spaces or ._+=@- starting with "
            "a letter or digit, without '/', '\\' or '..'"
        )
    return text

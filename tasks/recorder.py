"""The recorder base of every study, over a narrow tracker interface.

A study recorder (`tasks/press_records.py`, `drive_records.py`, `inverse_records.py`) says
*what* a study records; `Recorder` owns *how*: the parent run's lifecycle (`session`), child
runs (`child_run`), params/metrics/tags/JSON/table/figure artifacts through a `Run` handle, the
dataset lineage (data hash) and the cache tags copied onto every child.

It writes through any `RunTracker`: `tasks.tracking.Tracker` (MLflow, the default) or
`InMemoryTracker` (everything kept in memory: params, metrics, tags, artifacts by name with
their content, runs with their parent and status) for tests and for users who want a
study's records without a store. Both format values the same way (`param_text`, `finite`).

This module imports neither mlflow nor matplotlib at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import posixpath
import re
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

PARAM_VALUE_LIMIT = 6000


def content_hash(frame: pd.DataFrame) -> str:
    """SHA-256 of a table's content (values, column names and dtypes; not the index)."""
    hashed = pd.util.hash_pandas_object(frame.reset_index(drop=True), index=False)
    digest = hashlib.sha256(hashed.to_numpy().tobytes())
    digest.update(json.dumps([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode())
    return digest.hexdigest()


def git_commit(cwd: Path | None = None) -> str:
    """The project's current commit (with `+dirty` if the tree has changes), or `unknown`."""
    root = cwd or Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("+dirty" if dirty else "")) if sha else "unknown"


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


@dataclass
class Run:
    """One open run: log to it by name, without repeating the tracker and the id. Keys are
    made MLflow-safe (`mlflow_key`); a changed key's original name is the run's tag
    `greylab.key.<key>` (result JSON keeps the original names)."""

    tracker: RunTracker
    id: str

    def _safe(self, values: Mapping[str, Any]) -> dict[str, Any]:
        safe, renamed = mlflow_keys(values)
        if renamed:
            self.tracker.set_tags(
                self.id, {mlflow_key(ORIGINAL_KEY_TAG + k): v for k, v in renamed.items()}
            )
        return safe

    def params(self, values: Mapping[str, Any]) -> None:
        self.tracker.log_params(self.id, self._safe(values))

    def metrics(self, values: Mapping[str, float], *, step: int = 0) -> None:
        self.tracker.log_metrics(self.id, self._safe(values), step=step)

    def series(self, key: str, values: Iterable[float], *, start: int = 0) -> None:
        (safe,) = self._safe({key: None})
        self.tracker.log_series(self.id, safe, values, start=start)

    def tags(self, values: Mapping[str, Any]) -> None:
        self.tracker.set_tags(self.id, self._safe(values))

    def json(self, obj: Any, artifact_file: str) -> None:
        self.tracker.log_json(self.id, obj, artifact_file)

    def table(self, frame: pd.DataFrame, artifact_file: str) -> None:
        self.tracker.log_table(self.id, frame, artifact_file)

    def figure(self, figure: Any, artifact_file: str) -> None:
        self.tracker.log_figure(self.id, figure, artifact_file)


class ChildRun(Run):
    """A child run inside `Recorder.child_run`; set `failed` to end it FAILED without raising."""

    failed: bool = False


class Recorder:
    """The parent run of one study invocation, and its child runs.

    Subclasses name the study and the run and add what their study records. Use
    `with recorder.session(settings) as run_id:` in a flow: the run opens with the settings as
    params and ends FINISHED, or FAILED when the block raises or `recorder.failed` was set.
    `tracker`: where to write (default: MLflow through `tasks.tracking.Tracker`).
    """

    study = ""
    run_name = ""

    def __init__(self, experiment: str, tracker: RunTracker | None = None) -> None:
        if tracker is None:
            from tasks.tracking import Tracker  # imports mlflow

            tracker = Tracker()
        self.experiment = experiment
        self.tracker: RunTracker = tracker
        self.parent: str | None = None
        self.failed = False
        self.shared_tags: dict[str, str] = {}  # copied onto every child run
        self._tables: dict[str, pd.DataFrame] = {}

    @property
    def run_id(self) -> str:
        if self.parent is None:
            raise RuntimeError(f"{type(self).__name__}: the run is not open (use session())")
        return self.parent

    @property
    def run(self) -> Run:
        """The open parent run."""
        return Run(self.tracker, self.run_id)

    def log_settings(self, settings: dict[str, Any]) -> None:
        self.run.params({k: v for k, v in settings.items() if v is not None})

    @contextlib.contextmanager
    def session(
        self,
        settings: dict[str, Any],
        *,
        tags: Mapping[str, str] | None = None,
        defer: Iterable[str] = (),
    ) -> Iterator[str]:
        """The parent run: `settings` as params except `defer` (settings whose value the run
        decides, e.g. the number of tests a split kind allows: the recorder logs what was
        used); `tags` (e.g. the Prefect flow run's id and URL) on the parent and every child."""
        self.tracker.ensure_store()
        self.parent = self.tracker.start_run(self.experiment, self.run_name, study=self.study)
        try:
            deferred = set(defer)
            self.log_settings({k: v for k, v in settings.items() if k not in deferred})
            if tags:
                self.run.tags(tags)
                self.shared_tags |= dict(tags)
            yield self.parent
        except BaseException:
            self.tracker.end_run(self.parent, failed=True)
            raise
        self.tracker.end_run(self.parent, failed=self.failed)

    @contextlib.contextmanager
    def child_run(self, name: str) -> Iterator[ChildRun]:
        """A child run of the parent with the shared tags; it ends FINISHED, or FAILED when
        the block raises or `run.failed` was set."""
        run_id = self.tracker.start_run(
            self.experiment, name, study=self.study, parent_run_id=self.run_id,
            tags=self.shared_tags,
        )  # fmt: skip
        run = ChildRun(self.tracker, run_id)
        try:
            yield run
        except BaseException:
            self.tracker.end_run(run_id, failed=True)
            raise
        self.tracker.end_run(run_id, failed=run.failed)

    def table(self, path: str) -> pd.DataFrame:
        """The stored Parquet table at `path`, read once per recorder (tables are
        content-addressed: a path's content never changes)."""
        if path not in self._tables:
            self._tables[path] = pd.read_parquet(path)
        return self._tables[path]

    def lineage(self, path: str, source: str, *, digest: str | None = None) -> str:
        """Dataset lineage on the parent: tags `greylab.data_hash` (the table's content hash:
        `digest` when the caller has it, else computed) and `greylab.data_source`, a dataset
        input named after the study; both tags are copied onto every child. Returns the hash."""
        digest = self.tracker.log_dataset(
            self.run_id,
            path,
            description=source,
            name=self.study,
            frame=self.table(path),
            digest=digest,
        )
        self.shared_tags |= {"greylab.data_hash": digest, "greylab.data_source": source}
        return digest

    def register(
        self,
        run: Run,
        spec: Mapping[str, Any],
        *,
        name: str,
        input_example: pd.DataFrame,
        tags: Mapping[str, Any],
        description: str,
    ) -> dict[str, str]:
        """Log `spec` as an MLflow pyfunc model (`tasks.products`) in `run` and register a
        new version of `name`, tagged with the data hash, the run and `tags`; the run gets
        the tag `greylab.model_uri`. Returns name, version and `models:/` URI."""
        from tasks.products import saved_pyfunc  # imports mlflow

        version_tags = {
            "greylab.data_hash": self.shared_tags.get("greylab.data_hash", ""),
            "greylab.run_id": run.id,
            "greylab.study": self.study,
            "greylab.commit": git_commit(),
            **tags,
        }
        with saved_pyfunc(spec, input_example=input_example, metadata=version_tags) as folder:
            source = self.tracker.log_model(run.id, folder)
        version = self.tracker.register_model(name, source, run.id, version_tags, description)
        uri = f"models:/{name}/{version}"
        run.tags({"greylab.model_uri": uri})
        return {"name": name, "version": version, "uri": uri}

    def experiment_id(self) -> str:
        """The id of the recorder's experiment in the store ("" where there is none)."""
        lookup = getattr(self.tracker, "experiment_id", None)
        return str(lookup(self.experiment)) if lookup is not None else ""

    def outcome(self, run: Run, name: str, note: str = "") -> None:
        """Name `run` after its outcome (`M3 - passes`) and give it a description (Markdown,
        shown on the run's page: `mlflow.note.content`)."""
        tags = {"mlflow.runName": name[:250]}
        if note:
            tags["mlflow.note.content"] = note[:PARAM_VALUE_LIMIT]
        run.tags(tags)

    def cache_tags(self, tags: Mapping[str, str]) -> None:
        """Which steps came from the cache (`greylab.cache`, `greylab.cached_steps`): on the
        parent and copied onto every child."""
        self.run.tags(tags)
        self.shared_tags |= dict(tags)


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


def __getattr__(name: str) -> Any:
    """`InMemoryTracker` and `RecordedRun` live in `tasks.memory_tracker`; the old import
    path `tasks.recorder.InMemoryTracker` keeps working."""
    if name in ("InMemoryTracker", "RecordedRun"):
        from tasks import memory_tracker

        return getattr(memory_tracker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

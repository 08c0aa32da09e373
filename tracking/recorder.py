"""The recorder base of every study, over the narrow tracker interface (`tracking.protocol`).

A study recorder (`tasks/<study>/records.py`) says *what* a study records; `Recorder` owns
*how*: the parent run's lifecycle (`session`), child runs (`child_run`),
params/metrics/tags/JSON/table/figure artifacts through a `Run` handle, the dataset lineage
(data hash) and the cache tags copied onto every child. Registering a model product is
`products.register.register` (it needs MLflow's model format).

It writes through any `RunTracker`: `tracking.mlflow_tracker.Tracker` (MLflow, the default) or
`tracking.memory.InMemoryTracker` (everything kept in memory) for tests and for users who want
a study's records without a store. This module imports neither mlflow nor matplotlib at import
time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from runtime import deferred
from runtime.figures import FigureJob
from tracking.protocol import (
    ORIGINAL_KEY_TAG,
    PARAM_VALUE_LIMIT,
    RunTracker,
    mlflow_key,
    mlflow_keys,
)


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
        """Log a figure; in the command line's own process after the answer is printed
        (`runtime.deferred`: rendering a PNG is the slowest part of tracking), elsewhere now.
        `figure` may be a function that builds it (no arguments): then building it waits too
        (building the press study's figures took 1-2 s of its answer; issue 31). Deferred
        figures are drawn on two processes before they are logged (`runtime.figures`)."""

        build = figure if callable(figure) else lambda: figure  # a Figure is not callable
        log = lambda drawn: self.tracker.log_figure(self.id, drawn, artifact_file)  # noqa: E731
        # pixels only for a PNG: another format is matplotlib's own (e.g. vector SVG)
        deferred.defer(FigureJob(build, log, png=artifact_file.lower().endswith(".png")), "figures")


class ChildRun(Run):
    """A child run inside `Recorder.child_run`; set `failed` to end it FAILED without raising."""

    failed: bool = False


class Recorder:
    """The parent run of one study invocation, and its child runs.

    Subclasses name the study and the run and add what their study records. Use
    `with recorder.session(settings) as run_id:` in a flow: the run opens with the settings as
    params and ends FINISHED, or FAILED when the block raises or `recorder.failed` was set.
    `tracker`: where to write (default: MLflow through `tracking.mlflow_tracker.Tracker`).
    """

    study = ""
    run_name = ""

    def __init__(self, experiment: str, tracker: RunTracker | None = None) -> None:
        if tracker is None:
            from tracking.mlflow_tracker import Tracker  # imports mlflow

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

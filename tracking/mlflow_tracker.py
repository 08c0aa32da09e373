"""The one MLflow adapter.

Everything that talks to MLflow goes through `Tracker`. It logs with `MlflowClient` and run
ids (fluent runs are thread-local and invisible inside Prefect thread-pool tasks), sends
metrics in batches (one `log_batch` call is 30-300x faster than a call per value), and creates
the SQLite store once before any parallel logging (concurrent creation races on migrations).
Params, tags and metrics of a run this tracker started are gathered and sent together (`flush`:
one `log_batch` per run within MLflow's batch limits, a SQLite transaction each) when the run
ends, before another run starts and before a model is logged from it (issue 31: a press study
made 29 `log_batch` calls); values for any other run (ended, or started elsewhere) are sent at
once. A run cut off by a killed process keeps what was sent by then.

Names are consistent across studies so the MLflow compare view lines runs up:
params are plain setting names (`model`, `split`, `tol`, ...), metrics `param.<name>`,
`stderr.<name>`, `p_value` (stepped by test), tags `greylab.study`, `greylab.kind`
(`parent` or `child`), `greylab.data_hash`, `greylab.commit`.

`Tracker` is the MLflow implementation of `tracking.protocol.RunTracker`; the study recorders
(`tracking.recorder.Recorder` and its subclasses) write through that interface, so
`tracking.memory.InMemoryTracker` can stand in for it.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from runtime.figures import Pixels, draw
from runtime.settings import Settings, load_settings
from runtime.stores import owner_tags, prepare_tracking_store, tracking_client
from schemas.storage import content_hash
from tracking.protocol import finite, param_text, run_tags, validate_experiment_name

__all__ = ["Tracker"]

# Creating or upgrading a SQLite store logs every migration step at INFO: not news for users.
logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
logging.getLogger("alembic").setLevel(logging.WARNING)

_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_TAGS_PER_BATCH = 100
_MAX_ENTITIES_PER_BATCH = 1000  # MLflow's limit of params + tags + metrics in one log_batch


@dataclass
class _Pending:
    """A run's values not sent yet (in the order they came; a tag set twice keeps the last)."""

    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)


def batches(pending: _Pending) -> Iterable[tuple[list[Param], list[RunTag], list[Metric]]]:
    """`pending` cut into `log_batch` calls within MLflow's limits."""
    params = [Param(k, v) for k, v in pending.params.items()]
    tags = [RunTag(k, v) for k, v in pending.tags.items()]
    metrics = list(pending.metrics)
    while params or tags or metrics:
        p, params = params[:_MAX_PARAMS_PER_BATCH], params[_MAX_PARAMS_PER_BATCH:]
        t, tags = tags[:_MAX_TAGS_PER_BATCH], tags[_MAX_TAGS_PER_BATCH:]
        room = min(_MAX_METRICS_PER_BATCH, _MAX_ENTITIES_PER_BATCH - len(p) - len(t))
        m, metrics = metrics[:room], metrics[room:]
        yield p, t, m


def figure_key(artifact_file: str) -> str:
    """`figures/ellipsoid.png` -> `ellipsoid`: the key of a figure's image in MLflow."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", Path(artifact_file).stem) or "figure"


#: the experiment tag MLflow 3's UI reads for an experiment's kind (its web app's
#: `ExperimentKind`: genai_development, custom_model_development, ...)
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")


class Tracker:
    """Thin, thread-safe facade over `MlflowClient` for one tracking store."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        # created under the store's file lock: MLflow creates/migrates a store on first open
        self.client: MlflowClient = tracking_client(self.settings)
        self._pending: dict[str, _Pending] = {}
        self._open: set[str] = set()  # runs started here and not ended: their values wait
        self._lock = threading.Lock()

    # -- store and runs -------------------------------------------------------------
    def ensure_store(self) -> None:
        """Create or upgrade the store now, once, before parallel writers start, under a file
        lock shared with other processes; runs of killed processes become KILLED
        (`runtime.stores.prepare_tracking_store`)."""
        prepare_tracking_store(self.client, self.settings)

    def experiment_id(self, name: str) -> str:
        """The experiment `name`, created on first use, tagged as a model-development
        experiment (`EXPERIMENT_KIND`) so MLflow 3's UI opens it on its runs, not on GenAI
        traces; an existing experiment without the tag gets it."""
        validate_experiment_name(name)
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            if experiment.tags.get(EXPERIMENT_KIND[0]) is None:
                self.client.set_experiment_tag(experiment.experiment_id, *EXPERIMENT_KIND)
            return experiment.experiment_id
        location = None
        if self.settings.artifact_root:
            location = f"{self.settings.artifact_root.rstrip('/')}/{name}"
        try:
            return self.client.create_experiment(
                name, artifact_location=location, tags=dict([EXPERIMENT_KIND])
            )
        except Exception:  # created concurrently by another process: read it back
            experiment = self.client.get_experiment_by_name(name)
            if experiment is None:
                raise
            return experiment.experiment_id

    def start_run(
        self,
        experiment: str,
        name: str,
        *,
        study: str,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        all_tags = {**run_tags(study, parent_run_id, tags), **owner_tags()}
        self.flush()  # what the runs so far logged, before this one exists
        run = self.client.create_run(self.experiment_id(experiment), run_name=name, tags=all_tags)
        with self._lock:
            self._open.add(run.info.run_id)
        return run.info.run_id

    def end_run(self, run_id: str, *, failed: bool = False) -> None:
        with self._lock:
            self._open.discard(run_id)
        try:
            self.flush(run_id)
        finally:  # a run whose values MLflow refused still ends (FAILED when it failed)
            self.client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")

    # -- values: gathered per run, sent by `flush` -----------------------------------
    def _add(self, run_id: str, params: Mapping[str, str] = {}, tags: Mapping[str, str] = {},
             metrics: Iterable[Metric] = ()) -> None:  # fmt: skip
        with self._lock:
            pending = self._pending.setdefault(run_id, _Pending())
            clash = any(pending.params.get(k, v) != v for k, v in params.items())
        if clash:  # a param logged again with another value: MLflow refuses it, as before
            self.flush(run_id)
        with self._lock:
            pending = self._pending.setdefault(run_id, _Pending())
            pending.params.update(params)
            pending.tags.update(tags)
            pending.metrics.extend(metrics)
            now = run_id not in self._open  # a run ended or not started here: at once
        if now:
            self.flush(run_id)

    def flush(self, run_id: str | None = None) -> None:
        """Send the gathered params, tags and metrics of `run_id` (default: of every run)."""
        with self._lock:
            ids = list(self._pending) if run_id is None else [run_id]
            taken = [(i, self._pending.pop(i)) for i in ids if i in self._pending]
        for i, pending in taken:
            for params, tags, metrics in batches(pending):
                self.client.log_batch(i, metrics=metrics, params=params, tags=tags)

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        self._add(run_id, params={str(k): param_text(v) for k, v in params.items()})

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        self._add(run_id, tags={str(k): str(v) for k, v in tags.items()})

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], *, step: int = 0) -> None:
        now = int(time.time() * 1000)
        self._add(run_id, metrics=[Metric(k, finite(v), now, step) for k, v in metrics.items()])

    def log_series(self, run_id: str, key: str, values: Iterable[float], *, start: int = 0) -> None:
        """A stepped metric (`p_value` per test, best fitness per generation)."""
        now = int(time.time() * 1000)
        self._add(
            run_id, metrics=[Metric(key, finite(v), now, start + i) for i, v in enumerate(values)]
        )

    # -- artifacts -----------------------------------------------------------------------
    def log_json(self, run_id: str, obj: Any, artifact_file: str) -> None:
        self.client.log_dict(run_id, obj, artifact_file)

    def log_figure(self, run_id: str, figure: Any, artifact_file: str) -> None:
        """The figure as a PNG artifact, and as an image logged by key (`ellipsoid` for
        `figures/ellipsoid.png`, under `images/`) so MLflow's run comparison shows the
        figures of several runs side by side. Drawn once: both come from the same pixels
        (`savefig` at the figure's dpi would draw it again, twice with a layout engine, for
        the same image; issue 31: the figures were the slowest part of tracking)."""
        import matplotlib.image as mpimg

        if not isinstance(figure, Pixels):  # else drawn already (runtime.figures.prerender)
            if Path(artifact_file).suffix.lower() != ".png":  # another format: matplotlib's own
                try:
                    self.client.log_figure(run_id, figure, artifact_file)
                finally:
                    import matplotlib.pyplot as plt

                    plt.close(figure)
                return
            figure = draw(figure)
        rgba = figure.rgba
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(artifact_file).name
            mpimg.imsave(local, rgba, format="png", dpi=figure.dpi)
            directory = str(Path(artifact_file).parent)
            self.client.log_artifact(run_id, str(local), None if directory == "." else directory)
        self.client.log_image(run_id, rgba[..., :3].copy(), key=figure_key(artifact_file), step=0)

    def log_table(self, run_id: str, frame: pd.DataFrame, artifact_file: str) -> None:
        """A table as Parquet (`.parquet`) or CSV (`.csv`), by the file's suffix."""
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(artifact_file).name
            if local.suffix == ".parquet":
                frame.to_parquet(local, index=False)
            else:
                frame.to_csv(local, index=False)
            directory = str(Path(artifact_file).parent)
            self.client.log_artifact(run_id, str(local), None if directory == "." else directory)

    def log_dataset(
        self,
        run_id: str,
        path: str,
        *,
        description: str,
        name: str,
        frame: pd.DataFrame | None = None,
        digest: str | None = None,
    ) -> str:
        """Dataset lineage of a stored table (`path`, Parquet): its content hash and origin as
        tags, and an MLflow dataset input whose source is the stored file. `frame` (the table
        at `path`) and `digest` (its `content_hash`) save reading and hashing it again."""
        # mlflow.data registers from_pandas at import time, invisible to a type checker
        from mlflow.data.pandas_dataset import from_pandas
        from mlflow.entities import DatasetInput, InputTag

        frame = pd.read_parquet(path) if frame is None else frame
        digest = digest or content_hash(frame)
        self.set_tags(run_id, {"greylab.data_hash": digest, "greylab.data_source": description})
        with warnings.catch_warnings():
            # MLflow hints about integer columns in the inferred schema: not actionable for
            # lineage records (the table was validated), so keep them off the console.
            warnings.simplefilter("ignore", UserWarning)
            dataset = from_pandas(
                frame, source=Path(path).resolve().as_uri(), name=name, digest=digest[:36]
            )
            entity = dataset._to_mlflow_entity()
        context = [InputTag("mlflow.data.context", "input")]
        self.client.log_inputs(run_id, datasets=[DatasetInput(entity, tags=context)])
        return digest

    # -- models ------------------------------------------------------------------------
    def log_model(self, run_id: str, directory: Path, artifact_path: str = "model") -> str:
        """A saved MLflow model folder as the run's artifact; returns where it is stored (the
        run's artifact URI and `artifact_path`), the source of a registered version. Not the
        `runs:/` form: a tracking server with proxied artifacts (`--artifacts-destination`)
        cannot resolve that one for the version page, which then shows no signature ("Inputs
        (0)", mlflow/mlflow#6334); its stored location it serves."""
        self.flush(run_id)  # the run's values are in before a model is made from it
        self.client.log_artifacts(run_id, str(directory), artifact_path)
        root = self.client.get_run(run_id).info.artifact_uri.rstrip("/")
        return f"{root}/{artifact_path}"

    def register_model(
        self, name: str, source: str, run_id: str, tags: Mapping[str, Any], description: str
    ) -> str:
        """A new version of registered model `name` (created on first use) from `source`;
        returns the version number as text."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.create_registered_model(name, description=description)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        version = self.client.create_model_version(
            name, source, run_id=run_id, tags={str(k): str(v) for k, v in tags.items()},
            description=description,
        )  # fmt: skip
        return str(version.version)

    def find_model_version(self, name: str, tag: str, value: str) -> str | None:
        """The newest version of `name` whose tag `tag` is `value` (None: none, or no such
        registered model)."""
        if not re.fullmatch(r"[A-Za-z0-9._-]+", tag) or not re.fullmatch(r"[0-9a-f]+", value):
            return None
        safe = name.replace("'", "")
        found = self.client.search_model_versions(f"name = '{safe}' and tags.`{tag}` = '{value}'")
        versions = sorted(int(v.version) for v in found if v.name == name)
        return str(versions[-1]) if versions else None

    def describe_model_version(self, name: str, version: str, section: str) -> None:
        """Put `section` (a paragraph starting with its title, e.g. "Validation: ...") into the
        version's description: it replaces an older paragraph of that title, the rest (the
        verdict first) stays."""
        title = section.split(":", 1)[0] + ":"
        current = self.client.get_model_version(name, version).description or ""
        kept = [p for p in current.split("\n\n") if p and not p.startswith(title)]
        self.client.update_model_version(name, version, description="\n\n".join([*kept, section]))

    def set_model_alias(self, name: str, alias: str, version: str) -> None:
        """Point `alias` of registered model `name` at `version` (moved from any other)."""
        self.client.set_registered_model_alias(name, alias, version)

    def set_model_version_tags(
        self, name: str, version: str, tags: Mapping[str, Any], *, replace_prefix: str = ""
    ) -> None:
        """Set `tags` on a version; with `replace_prefix`, first remove the version's other
        tags of that prefix (a newer validation replaces the whole older one)."""
        if replace_prefix:
            current = self.client.get_model_version(name, version).tags or {}
            for key in current:
                if key.startswith(replace_prefix) and key not in tags:
                    self.client.delete_model_version_tag(name, version, key)
        for key, value in tags.items():
            self.client.set_model_version_tag(name, version, str(key), str(value))

    def model_versions(self, run_id: str) -> list[tuple[str, str]]:
        """(name, version) of every registered version made from run `run_id`."""
        if not re.fullmatch(r"[0-9a-f]{32}", run_id):
            return []
        found = self.client.search_model_versions(f"run_id = '{run_id}'")
        return [(v.name, str(v.version)) for v in found]

    def ui_hint(self) -> str:
        uri = self.settings.tracking_uri
        if uri.startswith(("sqlite:", "file:")):
            return (
                f"python -m deployments.mlflow_ui server --backend-store-uri {uri} --port 5000"
                "  (then http://127.0.0.1:5000)"
            )
        return f"open {uri} in a browser"

"""`InMemoryTracker`: a `tracking.recorder.RunTracker` keeping every run in memory (params,
metrics, tags, artifacts by name with their content, runs with their parent and status,
registered model versions) for tests and for users who want a study's records without a
store. It formats values exactly as the MLflow adapter does (`param_text`, `finite`)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from runtime.figures import Pixels
from runtime.stores import owner_tags
from schemas.storage import content_hash
from tracking.protocol import finite, param_text, run_tags


@dataclass
class RecordedRun:
    """Everything recorded in one run: `metrics[key]` is `[(step, value), ...]` in logging
    order; `artifacts[name]` is a dict (JSON), a DataFrame (table) or PNG bytes (figure)."""

    run_id: str
    experiment: str
    name: str
    parent_run_id: str | None
    status: str = "RUNNING"
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    datasets: list[dict[str, str]] = field(default_factory=list)

    def metric(self, key: str) -> float:
        """The last value logged for `key`."""
        return self.metrics[key][-1][1]


class InMemoryTracker:
    """A `RunTracker` keeping every run in `runs` (by id, in creation order)."""

    def __init__(self) -> None:
        self.runs: dict[str, RecordedRun] = {}
        self.models: dict[str, list[dict[str, Any]]] = {}  # registered name -> versions
        self.store_ready = False

    def ensure_store(self) -> None:
        self.store_ready = True

    def start_run(
        self,
        experiment: str,
        name: str,
        *,
        study: str,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        run_id = f"run-{len(self.runs) + 1}"
        run = RecordedRun(run_id, experiment, name, parent_run_id)
        run.tags = {**run_tags(study, parent_run_id, tags), **owner_tags()}  # as `Tracker`
        self.runs[run_id] = run
        return run_id

    def end_run(self, run_id: str, *, failed: bool = False) -> None:
        self.runs[run_id].status = "FAILED" if failed else "FINISHED"

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        self.runs[run_id].params |= {str(k): param_text(v) for k, v in params.items()}

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        run = self.runs[run_id]
        run.tags |= {str(k): str(v) for k, v in tags.items()}
        run.name = run.tags.pop("mlflow.runName", run.name)  # as MLflow renames a run

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], *, step: int = 0) -> None:
        for key, value in metrics.items():
            self.runs[run_id].metrics.setdefault(key, []).append((step, finite(value)))

    def log_series(self, run_id: str, key: str, values: Iterable[float], *, start: int = 0) -> None:
        steps = self.runs[run_id].metrics.setdefault(key, [])
        steps += [(start + i, finite(v)) for i, v in enumerate(values)]

    def log_json(self, run_id: str, obj: Any, artifact_file: str) -> None:
        self.runs[run_id].artifacts[artifact_file] = json.loads(json.dumps(obj))

    def log_figure(self, run_id: str, figure: Any, artifact_file: str) -> None:
        import matplotlib.image as mpimg
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        if isinstance(figure, Pixels):  # drawn already (runtime.figures.prerender)
            mpimg.imsave(buffer, figure.rgba, format="png", dpi=figure.dpi)
        else:
            try:
                figure.savefig(buffer, format="png")
            finally:
                plt.close(figure)
        self.runs[run_id].artifacts[artifact_file] = buffer.getvalue()

    def log_table(self, run_id: str, frame: pd.DataFrame, artifact_file: str) -> None:
        self.runs[run_id].artifacts[artifact_file] = frame.reset_index(drop=True).copy()

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
        table = pd.read_parquet(path) if frame is None else frame
        digest = digest or content_hash(table)
        self.set_tags(run_id, {"greylab.data_hash": digest, "greylab.data_source": description})
        source = Path(path).resolve().as_uri()
        self.runs[run_id].datasets.append({"name": name, "source": source, "digest": digest[:36]})
        return digest

    def log_model(self, run_id: str, directory: Path, artifact_path: str = "model") -> str:
        """Every file of the saved model folder as an artifact `<artifact_path>/<file>`
        (the same names MLflow lists); `.json` files as dicts, the rest as bytes."""
        for file in sorted(p for p in directory.rglob("*") if p.is_file()):
            name = f"{artifact_path}/{file.relative_to(directory).as_posix()}"
            data = file.read_bytes()
            self.runs[run_id].artifacts[name] = json.loads(data) if file.suffix == ".json" else data
        return f"runs:/{run_id}/{artifact_path}"

    def register_model(
        self, name: str, source: str, run_id: str, tags: Mapping[str, Any], description: str
    ) -> str:
        versions = self.models.setdefault(name, [])
        versions.append({"version": str(len(versions) + 1), "source": source, "run_id": run_id,
                         "tags": {str(k): str(v) for k, v in tags.items()},
                         "description": description})  # fmt: skip
        return versions[-1]["version"]

    def set_model_version_tags(
        self, name: str, version: str, tags: Mapping[str, Any], *, replace_prefix: str = ""
    ) -> None:
        entry = self.models[name][int(version) - 1]
        if replace_prefix:
            entry["tags"] = {k: v for k, v in entry["tags"].items()
                             if not k.startswith(replace_prefix)}  # fmt: skip
        entry["tags"] |= {str(k): str(v) for k, v in tags.items()}

    def model_versions(self, run_id: str) -> list[tuple[str, str]]:
        return [(name, v["version"]) for name, versions in self.models.items()
                for v in versions if v["run_id"] == run_id]  # fmt: skip

    def ui_hint(self) -> str:
        return "in memory (InMemoryTracker.runs)"

    # -- queries for tests -----------------------------------------------------------------
    def children(self, parent_run_id: str) -> list[RecordedRun]:
        return [r for r in self.runs.values() if r.parent_run_id == parent_run_id]

    def parents(self) -> list[RecordedRun]:
        return [r for r in self.runs.values() if r.parent_run_id is None]

"""Registering a study's identified model: log its spec as an MLflow pyfunc model in the run
that fitted it and register a new version (the study recorders call this; `Recorder` itself
knows no model format)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from runtime.provenance import git_commit
from tracking.recorder import Recorder, Run


def register(
    recorder: Recorder,
    run: Run,
    spec: Mapping[str, Any],
    *,
    name: str,
    input_example: pd.DataFrame,
    tags: Mapping[str, Any],
    description: str,
) -> dict[str, str]:
    """Log `spec` as an MLflow pyfunc model (`products.pyfunc`) in `run` of `recorder` and
    register a new version of `name`, tagged with the data hash, the run and `tags`; the run gets
    the tag `greylab.model_uri`. Returns name, version and `models:/` URI."""
    from products.pyfunc import saved_pyfunc  # imports mlflow

    version_tags = {
        "greylab.data_hash": recorder.shared_tags.get("greylab.data_hash", ""),
        "greylab.run_id": run.id,
        "greylab.study": recorder.study,
        "greylab.commit": git_commit(),
        **tags,
    }
    with saved_pyfunc(spec, input_example=input_example, metadata=version_tags) as folder:
        source = recorder.tracker.log_model(run.id, folder)
    version = recorder.tracker.register_model(name, source, run.id, version_tags, description)
    uri = f"models:/{name}/{version}"
    run.tags({"greylab.model_uri": uri})
    return {"name": name, "version": version, "uri": uri}

"""Registering a study's identified model: log its spec as an MLflow pyfunc model in the run
that fitted it and register a new version (the study recorders call this; `Recorder` itself
knows no model format)."""

from __future__ import annotations

import hashlib
import json
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
    accepted: bool | None = None,
) -> dict[str, str]:
    """Log `spec` as an MLflow pyfunc model (`products.pyfunc`) in `run` of `recorder` and
    register a new version of `name`, tagged with the data hash, the run and `tags`; the run gets
    the tag `greylab.model_uri`. Returns name, version and `models:/` URI.

    A version with the same content (`greylab.spec_hash`: the spec, the data hash and the
    verdict; a cached rerun) is reused, not registered again (`reused` is then "1" and the
    run gets `greylab.model_reused` too). `accepted` True (the model passed its test) moves
    the alias `champion` to the version: the current accepted model of that name; a rejected
    or untested model never gets it."""
    from products.pyfunc import saved_pyfunc  # imports mlflow

    data_hash = recorder.shared_tags.get("greylab.data_hash", "")
    key = spec_hash(spec, data_hash, str(tags.get("greylab.verdict", "")))
    tracker = recorder.tracker
    version = same_version(tracker, name, key)
    reused = version is not None
    if version is None:
        version_tags = {
            "greylab.data_hash": data_hash,
            "greylab.run_id": run.id,
            "greylab.study": recorder.study,
            "greylab.commit": git_commit(),
            "greylab.spec_hash": key,
            **tags,
        }
        with saved_pyfunc(spec, input_example=input_example, metadata=version_tags) as folder:
            source = tracker.log_model(run.id, folder)
        version = tracker.register_model(name, source, run.id, version_tags, description)
    uri = f"models:/{name}/{version}"
    run.tags({"greylab.model_uri": uri} | ({"greylab.model_reused": "1"} if reused else {}))
    set_alias = getattr(tracker, "set_model_alias", None)
    if accepted and callable(set_alias):
        set_alias(name, CHAMPION, version)
    return {"name": name, "version": version, "uri": uri, "reused": "1" if reused else ""}


CHAMPION = "champion"


def spec_hash(spec: Mapping[str, Any], data_hash: str, verdict: str) -> str:
    """What makes two registered versions the same: the model spec (structure, fitted values),
    the data it was fitted on and its verdict."""
    text = json.dumps([spec, data_hash, verdict], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def same_version(tracker: Any, name: str, key: str) -> str | None:
    """The version of `name` tagged `greylab.spec_hash` = `key`, if one is registered."""
    find = getattr(tracker, "find_model_version", None)
    if callable(find):
        found = find(name, "greylab.spec_hash", key)
        return None if found is None else str(found)
    for entry in getattr(tracker, "models", {}).get(name, []):  # the in-memory tracker
        if entry["tags"].get("greylab.spec_hash") == key:
            return str(entry["version"])
    return None

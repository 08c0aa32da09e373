"""A lab's own system through the inverse-simulation flow as a deployment runs it (issue 30):
the worker allows it by GREYLAB_ALLOWED_SYSTEMS only (no CLI in between), a built-in system
runs beside it, and MLflow names the lab system's reference, own name and source hash; a
system the worker does not allow is refused by the settings before any run starts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crank_hoist"


def test_a_worker_allowed_lab_system_runs_beside_a_built_in(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    from flows.inverse.flow import InverseStudy, run_inverse_study
    from models.underactuated import plugins

    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setattr(plugins, "_SESSION_ALLOWED", set())
    monkeypatch.delenv(plugins.ALLOWED_ENV, raising=False)
    with pytest.raises(ValidationError, match="not allowed for flow runs"):
        InverseStudy(systems=["crank_hoist:CrankHoist"])
    monkeypatch.setenv(plugins.ALLOWED_ENV, "crank_hoist:CrankHoist")
    study = InverseStudy(
        systems=["crank_hoist:CrankHoist", "two_mass"], method="bdf2", dt=2e-3,
        overrides={"crank_hoist:CrankHoist.m": 12.0}, experiment="inverse-lab",
    )  # fmt: skip
    try:
        result = run_inverse_study(study, runner="thread", workers=2)
    finally:
        sys.modules.pop("crank_hoist", None)
    lab, builtin = result.runs
    assert lab["status"] == "ok" and builtin["status"] == "ok"
    assert lab["parameters"]["m"] == 12.0 and builtin["parameters"]["m1"] == 1.0
    assert lab["error_vs_exact_by_column"]["tau"] < 1e-3  # BDF2 at 2 ms, peak ~60 N m
    client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("inverse-lab")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    child = next(r for r in runs if r.data.params.get("system") == "crank_hoist:CrankHoist")
    assert child.info.status == "FINISHED"
    assert child.data.tags["greylab.system_name"] == "crank_hoist"
    assert child.data.tags["greylab.system_source"] == lab["plugin"]["source"]
    assert float(child.data.params["m"]) == 12.0

"""The inverse-simulation flow for real (ephemeral Prefect, thread runner, SQLite MLflow in a
temporary folder): two systems in parallel, then a failing demand in the same process (the
Prefect server is started once per process, ~12-14 s), with the MLflow runs checked."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration


def _runs(experiment: str) -> tuple[object, list]:
    from mlflow import MlflowClient

    client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no MLflow experiment '{experiment}'"
    return client, client.search_runs([found.experiment_id])


def test_two_systems_in_parallel_then_a_failure(home: Path, tmp_path: Path) -> None:
    from flows.inverse.flow import InverseStudy, run_inverse_study
    from methods.dae import InverseProblemError

    study = InverseStudy(
        systems=["two_mass", "planar_crane"], method="bdf2", dt=2e-3,
        overrides={"planar_crane.m": 6.0}, experiment="inverse-check",
    )  # fmt: skip
    result = run_inverse_study(study, runner="thread", workers=2)

    assert [r["system"] for r in result.runs] == ["two_mass", "planar_crane"]
    assert all(r["status"] == "ok" for r in result.runs) and result.n_failed == 0
    for r in result.runs:
        assert r["max_constraint_violation"] <= 1e-8  # the bound on default demands
        assert r["tracking_error"] < 1e-3 and r["error_vs_exact"] < 1.0
        assert Path(r["table_path"]).is_file()

    client, runs = _runs("inverse-check")
    parents = [r for r in runs if r.data.tags["greylab.kind"] == "parent"]
    children = {r.data.params["system"]: r for r in runs if r.data.tags["greylab.kind"] == "child"}
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert (
        parents[0].data.metrics["n_simulations"] == 2 and parents[0].data.metrics["n_failed"] == 0
    )
    assert set(children) == {"two_mass", "planar_crane"}
    crane = children["planar_crane"]
    assert crane.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert crane.data.tags["greylab.study"] == "inverse" and crane.info.status == "FINISHED"
    assert crane.data.params["method"] == "bdf2" and float(crane.data.params["dt"]) == 2e-3
    assert float(crane.data.params["m"]) == 6.0 and float(crane.data.params["m_t"]) == 10.0
    assert float(crane.data.params["t_end"]) == pytest.approx(8.0)
    for key in (
        "max_constraint_violation", "tracking_error", "error_vs_exact", "newton_iterations_total",
        "newton_iterations_max", "wall_time_s", "compile_time_s", "tracking_error.x",
    ):  # fmt: skip
        assert key in crane.data.metrics, key
    assert crane.data.metrics["max_constraint_violation"] <= 1e-8

    names = {a.path for a in client.list_artifacts(crane.info.run_id)}
    assert {"trajectory.parquet", "rank_info.json", "result.json", "figures"} <= names
    figures = {a.path for a in client.list_artifacts(crane.info.run_id, "figures")}
    assert figures == {"figures/trajectory.png", "figures/velocities.png"}
    local = client.download_artifacts(crane.info.run_id, "trajectory.parquet", str(tmp_path))
    table = pd.read_parquet(local)
    assert list(table.columns) == ["t_s", "s", "l", "theta", "v_s", "v_l", "v_theta", "F", "M_w"]
    assert len(table) == 4001

    # an infeasible demand (load lifted above the trolley): recorded as a FAILED child with the
    # message and time, not retried, and the flow ends with an InputError naming the time
    bad = InverseStudy(
        systems=["planar_crane"], dt=2e-3, experiment="inverse-fail",
        demand={"t_end": 4.0, "outputs": {
            "x": {"type": "constant", "value": 0.0},
            "z": {"type": "step", "start": -2.0, "end": 1.0, "t0": 0.5, "t1": 3.5},
        }},
    )  # fmt: skip
    with pytest.raises(InverseProblemError, match=r"infeasible demand.*at t = ") as info:
        run_inverse_study(bad)
    assert 0.5 < info.value.time < 3.5
    _, runs = _runs("inverse-fail")
    child = next(r for r in runs if r.data.tags["greylab.kind"] == "child")
    parent = next(r for r in runs if r.data.tags["greylab.kind"] == "parent")
    assert child.info.status == "FAILED" and parent.info.status == "FAILED"
    assert "infeasible demand" in child.data.tags["greylab.error"]
    assert child.data.metrics["failed_at_s"] == pytest.approx(info.value.time)

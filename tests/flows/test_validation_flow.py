"""The `model-validation` flow (issue 27): a registered model validated on new data as a flow
run, with the evaluation run and version tags that `greylab press|drive validate` record.

Oracles: the pure core called directly on the same files (the flow changes no number), the
store (the evaluation run, its tags and the version's tags read back from MLflow) and the
Prefect API (the run's name, its artifacts and its one task run on bad input).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from flows.cli import main
from methods import correct_to_setpoints, fit_parameters
from models.drivetrain import REFERENCE_STRUCTURE, reference_recording
from models.drivetrain.product import DriveModel
from models.drivetrain.submodels import parameter_specs
from models.press import M3, simulate_press
from products.register import register
from runtime.settings import load_settings
from tracking.mlflow_tracker import Tracker
from tracking.recorder import Recorder

SENSORS = ["D_vertical", "F_horizontal"]


class _Study(Recorder):
    study = "press"
    run_name = "press-study"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """press-M3 (accepted: alias champion) fitted on one twin campaign and the true drive model
    as drive-bench, in a SQLite store; a second campaign and a recording to validate on."""
    root = tmp_path_factory.mktemp("validation-flow")
    env = {"GREYLAB_HOME": str(root / "home"), "MLFLOW_TRACKING_URI": f"sqlite:///{root}/m.db"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        tracker = Tracker(load_settings(env))
        tracker.ensure_store()
        frame, sheet = simulate_press(truth="M3", seed=1)
        sigma = dict(zip(sheet["sensor"], sheet["sigma_um"]))
        fit = fit_parameters(M3, correct_to_setpoints(frame), sensors=SENSORS, sigma=sigma)
        recorder = _Study("fits", tracker)
        with recorder.session({"seed": 1}):
            with recorder.child_run("model-M3") as run:
                spec = {"kind": "press", "model": "M3", "fit": fit.to_dict(),
                        "sensors": list(M3.sensors), "ellipsoid": fit.ellipsoid(0.95).to_dict()}  # fmt: skip
                register(recorder, run, spec, name="press-M3", accepted=True,
                         input_example=pd.DataFrame({"force_N": [1e4, 5e4]}),
                         tags={"greylab.verdict": "passes"}, description="test")  # fmt: skip
        nominal = {s.name: s.nominal for k in REFERENCE_STRUCTURE for s in parameter_specs(k)}
        drive = DriveModel(structure=REFERENCE_STRUCTURE, parameters=nominal, dt=1e-3)
        drive_recorder = Recorder("fits", tracker)
        drive_recorder.study = "drive"
        with drive_recorder.session({}):
            register(drive_recorder, drive_recorder.run, {"kind": "drive", "model": drive.to_dict()},
                     name="drive-bench", input_example=reference_recording(duration=0.1),
                     tags={}, description="test")  # fmt: skip
        new, _ = simulate_press(truth="M3", seed=7)
        new.to_csv(root / "new.csv", index=False)
        reference_recording(noise=0.0).to_csv(root / "rec.csv", index=False)
    return dict(root=root, env=env, tracker=tracker)


@pytest.fixture
def env(store: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from prefect.settings import PREFECT_HOME, temporary_settings

    for key, value in store["env"].items():
        monkeypatch.setenv(key, value)
    with temporary_settings(updates={PREFECT_HOME: tmp_path / "prefect"}):
        yield store


def _prefect(call: Any) -> Any:
    from prefect.client.orchestration import get_client

    async def run() -> Any:
        async with get_client() as client:
            return await call(client)

    return asyncio.run(run())


def test_the_flow_validates_records_tags_and_names_its_run(env) -> None:
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.validation.flow import ModelValidation, run_validation_flow
    from products.validation import validate_model

    data = env["root"] / "new.csv"
    result = run_validation_flow(ModelValidation(model="press-M3", data=str(data)))  # champion
    direct = validate_model("models:/press-M3/1", data, kind="press")
    assert result.metrics == direct.metrics and result.data_hash == direct.data_hash
    assert result.model_uri == "models:/press-M3@champion" and result.versions == ("press-M3/1",)
    assert result.model == "press-M3 v1 (champion)"
    share = direct.result.outside_band_all
    assert result.headline().startswith("validation: press-M3 v1 (champion): R^2 ")
    assert f"{share:.1%} outside the 95 % band" in result.headline()

    client = env["tracker"].client
    run = client.get_run(result.run_id)
    tags = run.data.tags
    assert tags["greylab.study"] == "validation" and tags["greylab.kind"] == "validation"
    assert tags["greylab.model_kind"] == "press"
    assert tags["greylab.model_uri"] == "models:/press-M3@champion"
    assert run.info.run_name == result.headline()
    assert run.data.metrics["D_vertical.r2"] == pytest.approx(direct.metrics["D_vertical"]["r2"])
    version = client.get_model_version("press-M3", "1")
    assert version.tags["validation.run_id"] == result.run_id

    flow_run_id = tags["prefect.flow_run_id"]
    flow_run = _prefect(lambda c: c.read_flow_run(flow_run_id))
    assert flow_run.name == result.headline() and flow_run.state.is_completed()
    artifacts = _prefect(lambda c: c.read_artifacts(artifact_filter=ArtifactFilter(
        key=ArtifactFilterKey(any_=["validation-summary", "validation-result"]))))  # fmt: skip
    by_key = {a.key: a for a in artifacts if str(a.flow_run_id) == flow_run_id}
    assert by_key["validation-summary"].data == result.summary()
    assert by_key["validation-result"].data == result.markdown()
    summary = result.summary()
    assert "| D\\_vertical |" in summary and "| output | RMSE | fit % | R^2 |" in summary
    rows = [line for line in summary.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + len(result.metrics) and max(map(len, rows)) < 100  # a laptop's
    assert f"[run {result.run_id[:8]}]" in summary or result.run_id in summary  # short label


def test_a_drive_model_by_version_number(env) -> None:
    from flows.validation.flow import ModelValidation, run_validation_flow

    settings = ModelValidation(kind="drive", model="drive-bench", version="1",
                               data=str(env["root"] / "rec.csv"))  # fmt: skip
    result = run_validation_flow(settings)
    # the true model simulates its own noise-free recording: R^2 = 1 to rounding
    for name in ("velocity", "position"):
        assert result.metrics[name]["r2"] == pytest.approx(1.0, abs=1e-12)
    assert result.headline().startswith("validation: drive-bench v1: R^2 1 (lowest: ")
    assert "band" not in result.headline()


def test_bad_input_fails_the_run_once_with_the_message(env) -> None:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.validation.flow import ModelValidation, model_validation
    from methods.errors import InputError

    settings = ModelValidation(model="press-M9", version="1", data=str(env["root"] / "new.csv"))
    state = model_validation(settings, return_state=True)
    assert state.is_failed()
    with pytest.raises(InputError, match="press-M9"):
        state.result()
    flow_run_id = state.state_details.flow_run_id
    task_runs = _prefect(lambda c: c.read_task_runs(
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))))  # fmt: skip
    (task_run,) = [t for t in task_runs if t.task_key.startswith("validate")]
    assert task_run.state.is_failed() and task_run.run_count == 1  # not retried


def test_cli_runs_the_flow_and_press_validate_records_the_same_run(env, capsys) -> None:
    data = str(env["root"] / "new.csv")
    code = main(["validation", "run", "--model", "press-M3", "--version", "1", "--data", data,
                 "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert set(out) == {"model_uri", "kind", "data", "data_hash", "model_run_id", "metrics",
                        "validation", "run_id", "versions", "warnings"}  # fmt: skip
    assert out["model_uri"] == "models:/press-M3/1" and out["versions"] == ["press-M3/1"]
    code = main(["press", "validate", "--model", "models:/press-M3/1", "--data", data, "--json"])
    quick = json.loads(capsys.readouterr().out)
    assert code == 0 and quick["metrics"] == out["metrics"]
    run = env["tracker"].client.get_run(quick["run_id"])  # the task code, without a flow
    assert run.data.tags["greylab.study"] == "validation"
    assert run.info.run_name.startswith("validation: press-M3 v1: R^2 ")
    code = main(["validation", "run", "--model", "runs:/x/model", "--data", data])
    assert code == 2 and "--model" in capsys.readouterr().err

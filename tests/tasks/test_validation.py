"""`greylab press|drive validate` and `greylab compare --models`: registered models validated
on data they were not fitted on, with the evaluation run and the version tags in MLflow (a
SQLite store in a temporary folder).

Oracles: the truth the data was simulated from (the true drive model reproduces its own
recording: R^2 = 1; the true press model M3 leaves about 5 % of new measurements outside its
95 % prediction band, the wrong model M1 far more), the pure core called directly on the same
inputs (the task and CLI layers must not change a number), and exit code 2 with a message
naming what is wrong for data that does not match the model.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from methods import InputError, correct_to_setpoints, fit_parameters
from methods.press import validate_predictions
from models.drivetrain import REFERENCE_STRUCTURE, reference_recording
from models.drivetrain.product import DriveModel
from models.drivetrain.submodels import parameter_specs
from models.press import M1, M3, simulate_press
from products.register import register
from products.validation import ValidationRecorder, validate_model
from runtime.settings import load_settings
from tracking.mlflow_tracker import Tracker
from tracking.recorder import Recorder

NOMINAL = {s.name: s.nominal for k in REFERENCE_STRUCTURE for s in parameter_specs(k)}
SENSORS = ["D_vertical", "F_horizontal"]


class _Study(Recorder):
    study = "press"
    run_name = "press-study"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """M1 and M3 fitted on one twin campaign (truth M3) and the true drive model, registered
    as press-M1, press-M3 and drive-bench; a second campaign and recording to validate on."""
    root = tmp_path_factory.mktemp("validation")
    env = {"GREYLAB_HOME": str(root / "home"), "MLFLOW_TRACKING_URI": f"sqlite:///{root}/m.db"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        tracker = Tracker(load_settings(env))
        tracker.ensure_store()
        frame, sheet = simulate_press(truth="M3", seed=1)
        sigma = dict(zip(sheet["sensor"], sheet["sigma_um"]))
        fits = {m.name: fit_parameters(m, correct_to_setpoints(frame), sensors=SENSORS,
                                       sigma=sigma) for m in (M1, M3)}  # fmt: skip
        recorder = _Study("fits", tracker)
        with recorder.session({"seed": 1}):
            for name, fit in fits.items():
                with recorder.child_run(f"model-{name}") as run:
                    spec = {"kind": "press", "model": name, "fit": fit.to_dict(),
                            "sensors": list(M3.sensors),
                            "ellipsoid": fit.ellipsoid(0.95).to_dict()}  # fmt: skip
                    example = pd.DataFrame({"force_N": [1e4, 5e4]})
                    register(recorder, run, spec, name=f"press-{name}", input_example=example,
                                      tags={"greylab.verdict": "x"}, description="test")  # fmt: skip
        drive = DriveModel(structure=REFERENCE_STRUCTURE, parameters=NOMINAL, dt=1e-3)
        drive_recorder = Recorder("fits", tracker)
        drive_recorder.study = "drive"
        with drive_recorder.session({}) as drive_run:
            example = reference_recording(duration=0.1)
            register(drive_recorder, drive_recorder.run, {"kind": "drive", "model": drive.to_dict()},
                                    name="drive-bench", input_example=example,
                                    tags={"greylab.structure": ",".join(REFERENCE_STRUCTURE)},
                                    description="test")  # fmt: skip
        new, new_sheet = simulate_press(truth="M3", seed=7)
        new.to_csv(root / "new.csv", index=False)
        new_sheet.to_csv(root / "new.sensors.csv", index=False)
        reference_recording(noise=0.0).to_csv(root / "rec.csv", index=False)
    return dict(root=root, env=env, tracker=tracker, fits=fits, sigma=sigma, drive=drive,
                drive_run=drive_run, new=new)  # fmt: skip


@pytest.fixture
def env(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for key, value in store["env"].items():
        monkeypatch.setenv(key, value)
    return store


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    out = json.loads(captured.out) if code == 0 and "--json" in args else captured.out
    return code, out, captured.err


def test_press_validation_equals_the_core_and_separates_true_from_wrong_model(env) -> None:
    data = env["root"] / "new.csv"
    outcome = {m: validate_model(f"models:/press-{m}/1", data, kind="press") for m in ("M1", "M3")}
    for name, model in (("M1", M1), ("M3", M3)):
        fit = env["fits"][name]
        core = validate_predictions(model, fit.parameters, fit.covariance, fit.sigma, env["new"])
        assert outcome[name].metrics == core.metrics  # the task layer changes no number
        assert outcome[name].details == core.to_dict()
        assert list(outcome[name].metrics) == SENSORS  # the fitted sensors (the fit's sigma)
    # truth M3: 6 x 29 x 2 = 348 measurements; the band share of a correct model is 5 % in
    # expectation (binomial std 1.2 %), the wrong friction model M1 misses far more
    assert outcome["M3"].result.outside_band_all < 0.10
    assert outcome["M1"].result.outside_band_all > 0.15
    for name in ("M1", "M3"):
        version = env["tracker"].client.get_model_version(f"press-{name}", "1")
        assert outcome[name].model_run_id == version.run_id


def test_a_sheet_adds_the_sensors_the_fit_did_not_use(env) -> None:
    root = env["root"]
    outcome = validate_model("models:/press-M3/1", root / "new.csv", kind="press",
                             sheet=root / "new.sensors.csv")  # fmt: skip
    assert list(outcome.metrics) == list(M3.sensors)


def test_the_evaluation_run_and_the_version_tags(env) -> None:
    root, client = env["root"], env["tracker"].client
    full = validate_model("models:/press-M3/1", root / "new.csv", kind="press",
                          sheet=root / "new.sensors.csv")  # fmt: skip
    recorded = ValidationRecorder("press", "validation-test", env["tracker"]).record(full)
    assert recorded.versions == ("press-M3/1",)
    run = client.get_run(recorded.run_id)
    assert run.data.tags["greylab.kind"] == "validation"
    # every evaluation run is the validation study's (flows/studies.py), of a press model
    assert run.data.tags["greylab.study"] == "validation"
    assert run.data.tags["greylab.model_kind"] == "press"
    assert run.data.tags["greylab.model_uri"] == "models:/press-M3/1"
    assert run.data.tags["greylab.model_run_id"] == full.model_run_id
    assert run.data.tags["greylab.data_hash"] == full.data_hash
    for sensor, values in full.metrics.items():
        for key, value in values.items():
            assert run.data.metrics[f"{sensor}.{key}"] == pytest.approx(value, rel=1e-12)
        outside = full.result.outside_band[sensor]
        assert run.data.metrics[f"{sensor}.outside_band"] == pytest.approx(outside)
    artifacts = {a.path for a in client.list_artifacts(recorded.run_id)}
    assert {"validation.json", "residuals.csv", "figures"} <= artifacts
    tags = client.get_model_version("press-M3", "1").tags
    assert tags["validation.run_id"] == recorded.run_id
    assert float(tags["validation.B0_vertical.r2"]) == pytest.approx(
        full.metrics["B0_vertical"]["r2"], rel=1e-5
    )
    described = client.get_model_version("press-M3", "1").description
    assert described.split("\n\n")[-1].startswith("Validation: R^2 ")
    assert f"B0_vertical {tags['validation.B0_vertical.r2']}" in described
    assert recorded.run_id in described and not described.startswith("Validation:")
    # a newer validation on fewer sensors replaces the whole older one: no stale sensor
    fewer = validate_model("models:/press-M3/1", root / "new.csv", kind="press")
    second = ValidationRecorder("press", "validation-test", env["tracker"]).record(fewer)
    tags = client.get_model_version("press-M3", "1").tags
    assert tags["validation.run_id"] == second.run_id
    assert not any(k.startswith("validation.B0_vertical") for k in tags)
    again = client.get_model_version("press-M3", "1").description
    assert again.count("Validation:") == 1 and second.run_id in again  # replaced, not added
    assert recorded.run_id not in again and again.split("\n\n")[0] == described.split("\n\n")[0]


def test_drive_validate_by_run_id_on_the_true_models_own_recording(env, capsys) -> None:
    rec = str(env["root"] / "rec.csv")
    code, out, _ = _cli(capsys, "drive", "validate", "--run", env["drive_run"], "--data", rec,
                        "--no-track", "--json")  # fmt: skip
    assert code == 0, out
    assert out["model_uri"] == "models:/drive-bench/1"  # the run's greylab.model_uri tag
    for name in ("velocity", "position"):
        assert out["metrics"][name]["r2"] == pytest.approx(1.0, abs=1e-12)
    assert out["run_id"] == "" and out["versions"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["drive", "validate", "--model", "models:/press-M3/1", "--data", "{rec}"],
         "is a press model; use `greylab press validate`"),
        (["press", "validate", "--model", "models:/press-M3/1", "--data", "{rec}"],
         "missing column"),
        (["drive", "validate", "--model", "models:/drive-bench/1", "--data", "{coarse}"],
         "sample time 0.002 s does not match the model's 0.001 s"),
        (["drive", "validate", "--model", "models:/drive-bench/1", "--run", "{run}", "--data",
          "{rec}"], "exactly one of --model"),
        (["drive", "validate", "--run", "../../etc/passwd", "--data", "{rec}"],
         "32 hexadecimal characters"),
        (["drive", "validate", "--run", "0" * 32, "--data", "{rec}"], "no such run"),
        (["press", "validate", "--model", "models:/press-M9/1", "--data", "{new}"],
         "cannot be loaded"),
        (["press", "validate", "--model", "models:/press-M3/1", "--data", "{new}",
          "--experiment", "<script>"], "experiment"),
    ],
)  # fmt: skip
def test_data_that_does_not_match_the_model_exits_2(env, capsys, args, message) -> None:
    root = env["root"]
    coarse = root / "coarse.csv"
    if not coarse.exists():
        reference_recording(dt=2e-3).to_csv(coarse, index=False)
    names = {"rec": root / "rec.csv", "coarse": coarse, "new": root / "new.csv",
             "run": env["drive_run"]}  # fmt: skip
    code, _, err = _cli(capsys, *[a.format(**names) for a in args], "--no-track")
    assert code == 2 and message in err, err
    assert "Traceback" not in err


def test_compare_models_lists_versions_with_their_newest_validation(env, capsys) -> None:
    root = env["root"]
    code, _, _ = _cli(capsys, "drive", "validate", "--model", "models:/drive-bench/1",
                      "--data", str(root / "rec.csv"), "--figure", str(root / "d.png"))  # fmt: skip
    assert code == 0 and (root / "d.png").read_bytes().startswith(b"\x89PNG")
    code, out, _ = _cli(capsys, "compare", "--models", "--json")
    assert code == 0
    rows = {(r["name"], r["version"]): r for r in out["models"]}
    assert {("press-M1", 1), ("press-M3", 1), ("drive-bench", 1)} <= set(rows)
    drive = rows[("drive-bench", 1)]
    assert drive["structure"] == ",".join(REFERENCE_STRUCTURE)
    assert drive["validation.position.r2"] == pytest.approx(1.0, abs=1e-9)
    code, out, _ = _cli(capsys, "compare", "--models", "--study", "drive", "--json")
    assert {r["name"] for r in out["models"]} == {"drive-bench"}
    code, _, err = _cli(capsys, "compare", "--models", "--study", "inverse")
    assert code == 2 and "press and drive" in err
    with pytest.raises(InputError):
        validate_model("models:/drive-bench/1", root / "new.csv", kind="press")


def test_emps_record_needs_a_prismatic_model(env) -> None:
    from schemas.drive import emps_pulses_path

    with pytest.raises(InputError, match="prismatic"):
        validate_model("models:/drive-bench/1", emps_pulses_path(), kind="drive")
    assert np.isfinite(env["drive"].dt)


def test_an_example_without_the_initial_state_still_declares_it(env) -> None:
    """MLflow drops input columns its signature does not declare: a model registered from a
    recording without position_rad must still take the caller's initial position."""
    import mlflow.pyfunc

    from products.pyfunc import saved_pyfunc

    example = reference_recording(duration=0.05)[["t_s", "torque_Nm", "velocity_rad_s"]]
    spec = {"kind": "drive", "model": env["drive"].to_dict()}
    with saved_pyfunc(spec, input_example=example, metadata={}) as folder:
        loaded = mlflow.pyfunc.load_model(str(folder))
        moved = loaded.predict(example.assign(position_rad=5.0))
    _, position = env["drive"].simulate(example["torque_Nm"].to_numpy(), position0=5.0)
    np.testing.assert_allclose(moved["position_rad"], position, rtol=1e-12)
    assert moved["position_rad"].iloc[0] == 5.0


def test_loading_a_product_leaves_no_tracking_uri_behind(env, monkeypatch) -> None:
    import os

    from products.pyfunc import load_product

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # greylab's default store under GREYLAB_HOME
    monkeypatch.setenv("GREYLAB_HOME", str(env["root"] / "elsewhere"))
    with pytest.raises(InputError, match="press-M3"):  # not in the default store
        load_product("models:/press-M3/1")
    assert "MLFLOW_TRACKING_URI" not in os.environ
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["env"]["MLFLOW_TRACKING_URI"])
    assert load_product("models:/press-M3/1").spec["model"] == "M3"  # the caller's choice

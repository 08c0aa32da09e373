"""Models as products (`products.pyfunc`): a press fit and a drive model registered through
`Recorder.register` in a SQLite MLflow store and loaded with `mlflow.pyfunc.load_model` as a
lab would. Oracles: `M3.response` and a central-difference delta method (press mean and std),
`predict_displacements`, the drive twin that generated the record and `DriveModel.simulate`,
the ellipsoid's definition, the input contract in the docstring of `products.pyfunc`."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from methods.errors import InputError
from products.register import register
from tracking.memory import InMemoryTracker

STRUCTURE = ("one_mass", "coulomb", "viscous")
DRIVE_PARAMETERS = {"J1": 0.012, "M_C": 0.25, "f_v": 0.015}
SAFE_NAME = re.compile(r"^[a-z]+-[A-Za-z0-9][A-Za-z0-9._-]*$")


@contextlib.contextmanager
def _tracking(uri: str) -> Iterator[None]:
    """`models:/` URIs resolve in `uri`: the environment a lab sets, and MLflow's process-wide
    URI (another test may have pinned it with `mlflow.set_tracking_uri`), both restored."""
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        with _use_tracking_uri(uri):
            yield


def _register(tracker: Any, spec: dict, name: str, example: pd.DataFrame) -> dict[str, Any]:
    from tracking.recorder import Recorder

    recorder = type("ProductRecorder", (Recorder,), {"study": "products"})("products", tracker)
    with recorder.session({"what": name}) as run_id:
        info = register(recorder,
            recorder.run, spec, name=name, input_example=example,
            tags={"greylab.model": name}, description=f"test model {name}",
        )  # fmt: skip
    return {**info, "run_id": run_id}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real `Tracker` on a SQLite store, a press M3 fit on the digital twin (truth M3)
    and a drive model, both registered and loaded back through `models:/` URIs."""
    import mlflow.pyfunc

    from methods import correct_to_setpoints, fit_parameters
    from models.drivetrain import reference_recording
    from models.drivetrain.product import DriveModel
    from models.press import M3, simulate_press
    from products.pyfunc import press_spec, registered_name
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    tmp = tmp_path_factory.mktemp("products")
    env = {"GREYLAB_HOME": str(tmp), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/m.db"}
    tracker = Tracker(load_settings(env))
    table, sheet = simulate_press("M3", seed=1)
    fit = fit_parameters(M3, correct_to_setpoints(table), sigma=sheet)
    q = M3.default_forces
    sensors = list(M3.sensors)
    example = pd.DataFrame(  # as PressRecorder: the ordered scenario, one row per sensor
        {"step": np.repeat(np.arange(q.size), len(sensors)), "force_N": np.repeat(q, len(sensors)),
         "sensor": np.tile(np.array(sensors, dtype=object), q.size)}
    )  # fmt: skip
    spec = press_spec("M3", fit, all_sensors=sensors)
    press = _register(tracker, spec, registered_name("press", "M3"), example)
    drive_model = DriveModel(structure=STRUCTURE, parameters=DRIVE_PARAMETERS, dt=1e-3)
    recording = reference_recording(STRUCTURE, DRIVE_PARAMETERS, duration=0.6)
    drive_spec = {"kind": "drive", "model": drive_model.to_dict()}
    drive = _register(tracker, drive_spec, registered_name("drive", "bench 1"), recording.head(200))
    with _tracking(env["MLFLOW_TRACKING_URI"]):
        press["loaded"] = mlflow.pyfunc.load_model(press["uri"])
        drive["loaded"] = mlflow.pyfunc.load_model(drive["uri"])
    return dict(env=env, tracker=tracker, fit=fit, q=q, sensors=sensors, press=press,
                drive=drive, drive_model=drive_model, recording=recording)  # fmt: skip


def _core(store: dict[str, Any], forces: Any, sensors: list[str] | None = None) -> pd.DataFrame:
    from methods.press.uncertainty.prediction import predict_displacements
    from models.press import M3

    fit = store["fit"]
    return predict_displacements(M3, fit.parameters, fit.covariance, forces, sensors).to_frame()


def _same_prediction(out: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(out.columns) == ["step", "force_N", "sensor", "displacement_um", "std_um"]
    assert len(out) == len(expected)
    for column in ("step", "force_N", "sensor"):
        assert out[column].tolist() == expected[column].tolist(), column
    for column in ("displacement_um", "std_um"):  # spec.json round trip: exact floats
        np.testing.assert_allclose(out[column], expected[column], rtol=1e-12, err_msg=column)


# -- press -----------------------------------------------------------------------------------
def test_registration_is_named_tagged_and_linked(store: dict[str, Any]) -> None:
    client = store["tracker"].client
    for kind, name in (("press", "press-M3"), ("drive", "drive-bench.1")):
        info = store[kind]
        assert (info["name"], info["version"], info["uri"]) == (name, "1", f"models:/{name}/1")
        version = client.get_model_version(name, "1")
        assert version.run_id == info["run_id"] and version.description == f"test model {name}"
        assert {"greylab.run_id": info["run_id"], "greylab.study": "products",
                "greylab.model": name, "greylab.data_hash": ""}.items() <= version.tags.items()  # fmt: skip
        assert client.get_run(info["run_id"]).data.tags["greylab.model_uri"] == info["uri"]
        assert store[kind]["loaded"].metadata.metadata["greylab.run_id"] == info["run_id"]


def test_press_prediction_is_the_core_prediction(store: dict[str, Any]) -> None:
    from models.press import M3

    q, fit = store["q"], store["fit"]
    out = store["press"]["loaded"].predict(pd.DataFrame({"force_N": q}))
    _same_prediction(out, _core(store, q))
    n_s = len(store["sensors"])  # rows ordered (step, sensor)
    assert out["step"].tolist() == np.repeat(np.arange(q.size), n_s).tolist()
    assert out["sensor"].tolist() == store["sensors"] * q.size
    mean = out["displacement_um"].to_numpy().reshape(q.size, n_s)
    np.testing.assert_allclose(mean, M3.response(fit.values, q), rtol=1e-12)
    # std: the delta method with a central-difference Jacobian of the model's own response
    p = np.asarray(fit.values, float)
    columns = []
    for i in range(p.size):
        h = 1e-6 * abs(p[i])
        up, down = p.copy(), p.copy()
        up[i] += h
        down[i] -= h
        columns.append((M3.response(up, q) - M3.response(down, q)).ravel() / (2 * h))
    J = np.column_stack(columns)
    std = np.sqrt(np.einsum("lp,pr,lr->l", J, fit.covariance, J))
    np.testing.assert_allclose(out["std_um"], std, rtol=1e-5)
    assert (out["std_um"] > 0).all()


def test_row_order_is_the_scenario_without_step(store: dict[str, Any]) -> None:
    loading = np.array([1e4, 2e4, 3e4, 4e4, 5e4])
    unloading = loading[::-1].copy()  # the same forces from the top: hysteresis, other values
    loaded = store["press"]["loaded"]
    down = loaded.predict(pd.DataFrame({"force_N": unloading}))
    _same_prediction(down, _core(store, unloading))
    up = loaded.predict(pd.DataFrame({"force_N": loading}))
    _same_prediction(up, _core(store, loading))
    n_s = len(store["sensors"])
    at_10kN_up = up["displacement_um"].to_numpy()[:n_s]
    at_10kN_down = down["displacement_um"].to_numpy()[-n_s:]
    assert (down["force_N"].to_numpy()[-n_s:] == 1e4).all()
    assert np.abs(at_10kN_down - at_10kN_up).max() > 0.1


def test_sensor_column_restricts_and_orders_the_output(store: dict[str, Any]) -> None:
    q, sensors = store["q"][:6], store["sensors"]
    asked = [sensors[2], sensors[0]]
    frame = pd.DataFrame({"force_N": q, "sensor": [asked[i % 2] for i in range(q.size)]})
    out = store["press"]["loaded"].predict(frame)
    _same_prediction(out, _core(store, q, asked))
    assert set(out["sensor"]) == set(asked)


def test_step_rows_may_come_in_any_order_and_repeat(store: dict[str, Any]) -> None:
    q, sensors = store["q"], store["sensors"]
    long = pd.DataFrame(
        {"step": np.repeat(np.arange(q.size), 2), "force_N": np.repeat(q, 2),
         "sensor": np.tile(np.array(sensors[:2], dtype=object), q.size)}
    )  # fmt: skip
    shuffled = long.sample(frac=1.0, random_state=3).reset_index(drop=True)
    repeated = pd.concat([shuffled, shuffled.iloc[::7]], ignore_index=True)
    assert shuffled["step"].tolist() != long["step"].tolist()
    out = store["press"]["loaded"].predict(repeated)
    expected = _core(store, q, list(dict.fromkeys(repeated["sensor"])))
    _same_prediction(out, expected)
    # step labels need not start at 0 or be contiguous: their order is the scenario's
    labelled = pd.DataFrame({"step": [30, 10, 20], "force_N": [q[2], q[0], q[1]]})
    out = store["press"]["loaded"].predict(labelled)
    assert out["step"].tolist() == np.repeat([10, 20, 30], len(sensors)).tolist()
    np.testing.assert_allclose(out["displacement_um"], _core(store, q[:3])["displacement_um"])


def test_metadata_holds_the_95_percent_ellipsoid(store: dict[str, Any]) -> None:
    fit, loaded = store["fit"], store["press"]["loaded"]
    ellipsoid = loaded.metadata.metadata["ellipsoid"]
    expected = fit.ellipsoid(0.95).to_dict()
    assert set(ellipsoid) == set(expected)
    assert ellipsoid["names"] == list(fit.names) and ellipsoid["level"] == 0.95
    for key in ("center", "covariance", "quantile", "semi_axes", "axes"):
        np.testing.assert_allclose(ellipsoid[key], expected[key], rtol=1e-15, err_msg=key)
    # independent: the definition from the fit's estimates and covariance
    np.testing.assert_allclose(ellipsoid["center"], list(fit.parameters.values()), rtol=1e-15)
    assert ellipsoid["quantile"] == pytest.approx(stats.chi2.ppf(0.95, len(fit.names)), rel=1e-12)
    eigenvalues = np.linalg.eigvalsh(np.asarray(fit.covariance))
    semi = np.sqrt(ellipsoid["quantile"] * eigenvalues)
    np.testing.assert_allclose(sorted(ellipsoid["semi_axes"]), sorted(semi), rtol=1e-10)


def test_signature_marks_step_and_sensor_optional(store: dict[str, Any]) -> None:
    for kind, required, optional in (
        ("press", {"force_N"}, {"step", "sensor"}),
        ("drive", {"t_s", "torque_Nm"}, {"velocity_rad_s", "position_rad"}),
    ):
        schema = store[kind]["loaded"].metadata.get_input_schema()
        flags = {c.name: c.required for c in schema.inputs}
        assert flags == {c: True for c in required} | {c: False for c in optional}, kind


# -- drive -----------------------------------------------------------------------------------
def test_drive_prediction_starts_at_the_first_sample(store: dict[str, Any]) -> None:
    whole = store["recording"].assign(position_rad=lambda f: f.position_rad + 3.0)
    tail = whole.iloc[300:].reset_index(drop=True)  # moving, away from 0: a real initial state
    assert abs(tail["velocity_rad_s"].iloc[0]) > 1.0 and tail["position_rad"].iloc[0] > 3.0
    out = store["drive"]["loaded"].predict(tail)
    assert list(out.columns) == ["t_s", "velocity_rad_s", "position_rad"]
    assert out["t_s"].tolist() == tail["t_s"].tolist()
    velocity, position = store["drive_model"].simulate(
        tail["torque_Nm"].to_numpy(), velocity0=float(tail["velocity_rad_s"].iloc[0]),
        position0=float(tail["position_rad"].iloc[0]),
    )  # fmt: skip
    np.testing.assert_allclose(out["velocity_rad_s"], velocity, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["position_rad"], position, rtol=1e-12, atol=1e-12)
    # the truth that generated the record: one mass, so the tail is the tail of the whole
    for column in ("velocity_rad_s", "position_rad"):
        scale = float(np.ptp(tail[column]))
        np.testing.assert_allclose(out[column], tail[column], atol=1e-10 * scale, err_msg=column)


def test_drive_starts_at_rest_without_state_columns(store: dict[str, Any]) -> None:
    recording, loaded = store["recording"], store["drive"]["loaded"]
    moving = recording.iloc[300:].reset_index(drop=True)
    out = loaded.predict(moving[["t_s", "torque_Nm"]])
    velocity, position = store["drive_model"].simulate(moving["torque_Nm"].to_numpy())
    np.testing.assert_allclose(out["velocity_rad_s"], velocity, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["position_rad"], position, rtol=1e-12, atol=1e-12)
    assert out["position_rad"].iloc[0] == 0.0 == out["velocity_rad_s"].iloc[0]
    only_velocity = loaded.predict(moving[["t_s", "torque_Nm", "velocity_rad_s"]])
    assert only_velocity["position_rad"].iloc[0] == 0.0
    assert only_velocity["velocity_rad_s"].iloc[0] == moving["velocity_rad_s"].iloc[0] != 0.0
    whole = loaded.predict(recording[["t_s", "torque_Nm"]])  # the record starts at rest
    np.testing.assert_allclose(whole["velocity_rad_s"], recording["velocity_rad_s"], atol=1e-10)


def test_load_product_gives_the_wrapper_and_its_spec(store: dict[str, Any]) -> None:
    from models.drivetrain.product import DriveModel
    from products.pyfunc import DrivePyfunc, PressPyfunc, load_product

    with _tracking(store["env"]["MLFLOW_TRACKING_URI"]):
        press = load_product(store["press"]["uri"])
        drive = load_product(store["drive"]["uri"])
    assert isinstance(press, PressPyfunc) and press.spec["model"] == "M3"
    assert press.parameters == store["fit"].parameters
    assert isinstance(drive, DrivePyfunc)
    assert DriveModel.from_dict(drive.spec["model"]) == store["drive_model"] == drive.model


# -- hostile input -----------------------------------------------------------------------------
def _error(loaded: Any, frame: pd.DataFrame) -> str:
    """The message of what `predict` raises: greylab's InputError or MLflow's schema check."""
    from mlflow.exceptions import MlflowException

    with pytest.raises((InputError, MlflowException)) as info:
        loaded.predict(frame)
    return str(info.value)


PRESS_BAD = {
    "no force_N": (pd.DataFrame({"force": [1e4, 2e4]}), r"missing inputs \['force_N'\]"),
    "NaN force": (pd.DataFrame({"force_N": [1e4, np.nan]}), r"force_N must be finite.*row 1"),
    "inf force": (pd.DataFrame({"force_N": [np.inf, 1e4]}), r"force_N must be finite.*row 0"),
    "no rows": (pd.DataFrame({"force_N": pd.Series([], dtype=float)}), r"no rows; give one force_N"),
    "unknown sensor": (pd.DataFrame({"force_N": [1e4], "sensor": ["../nope"]}),
                       r"sensor\(s\) \['\.\./nope'\] not in the model; it has \['D_vertical'"),
    "two forces": (pd.DataFrame({"step": [0, 3, 3], "force_N": [1e4, 2e4, 2.5e4]}),
                   r"step 3 has different forces"),
    "text force": (pd.DataFrame({"force_N": ["ten", "20"]}), r"force_N.*convert str"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(PRESS_BAD))
def test_bad_press_input_is_refused_with_a_reason(store: dict[str, Any], case: str) -> None:
    frame, pattern = PRESS_BAD[case]
    assert re.search(pattern, _error(store["press"]["loaded"], frame), re.S), case


def _drive_bad(recording: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, str]]:
    uneven = recording["t_s"].to_numpy().copy()
    uneven[50] += 4e-4
    nan_torque = recording["torque_Nm"].mask(recording.index == 7)
    return {
        "wrong sample time": (recording.assign(t_s=2 * recording["t_s"]),
                              r"model's sample time is 0\.001 s, but t_s steps by 0\.002 s"),
        "non-uniform time": (recording.assign(t_s=uneven), r"steps by [0-9.e-]+ s from row \d+"),
        "backwards time": (recording.iloc[::-1], r"t_s steps by -0\.001 s"),
        "one row": (recording.head(1), r"at least 2 rows"),
        "no rows": (recording.head(0), r"at least 2 rows"),
        "no torque_Nm": (recording[["t_s", "velocity_rad_s"]],
                         r"(missing inputs|lacks column\(s\)).*torque_Nm"),
        "no t_s": (recording[["torque_Nm"]], r"(missing inputs|lacks column\(s\)).*t_s"),
        "NaN torque": (recording.assign(torque_Nm=nan_torque),
                       r"(?=.*torque_Nm)(?=.*\b7\b)(?=.*finite)"),
    }  # fmt: skip


DRIVE_BAD = ("wrong sample time", "non-uniform time", "backwards time", "one row", "no rows",
             "no torque_Nm", "no t_s", "NaN torque")  # fmt: skip


@pytest.mark.parametrize("case", DRIVE_BAD)
def test_bad_drive_input_is_refused_with_a_reason(store: dict[str, Any], case: str) -> None:
    frame, pattern = _drive_bad(store["recording"])[case]
    assert re.search(pattern, _error(store["drive"]["loaded"], frame), re.S), case


def test_a_nan_initial_state_names_its_column(store: dict[str, Any]) -> None:
    recording = store["recording"]
    frame = recording.assign(velocity_rad_s=recording["velocity_rad_s"].mask(recording.index == 0))
    assert "velocity_rad_s" in _error(store["drive"]["loaded"], frame)


# -- names and loading -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "expected"),
    [("M3", "press-M3"), ("../etc", "press-etc"), ("a b/<script>", "press-a.b.script"),
     ("pkg.mod:attr", "press-pkg.mod.attr"), ("%2e%2e/..", "press-2e.2e"), ("x" * 500, None)],
)  # fmt: skip
def test_registered_name_is_safe(store: dict[str, Any], label: str, expected: str | None) -> None:
    from products.pyfunc import registered_name

    name = registered_name("press", label)
    assert name == expected or expected is None
    assert SAFE_NAME.match(name) and len(name) <= 100
    client = store["tracker"].client  # the registry takes it and gives it back unchanged
    if name != "press-M3":
        client.create_registered_model(name)
    assert client.get_registered_model(name).name == name


@pytest.mark.parametrize("label", ["", "..", "/", "-_-", "日本", " \t"])
def test_registered_name_without_letters_is_refused(label: str) -> None:
    from products.pyfunc import registered_name

    with pytest.raises(InputError, match="needs a letter or digit"):
        registered_name("drive", label)


class _Plain:
    """Not a greylab model: an ordinary pyfunc model."""

    def predict(self, context: Any, model_input: pd.DataFrame, params: Any = None) -> Any:
        return model_input


def test_load_product_refuses_what_is_not_a_greylab_model(
    store: dict[str, Any], tmp_path: Path
) -> None:
    import mlflow.pyfunc

    from products.pyfunc import load_product

    plain = type("Plain", (_Plain, mlflow.pyfunc.PythonModel), {})()
    mlflow.pyfunc.save_model(tmp_path / "plain", python_model=plain, pip_requirements=[])
    with _tracking(store["env"]["MLFLOW_TRACKING_URI"]):
        for uri in ("models:/press-nothing/1", "models:/press-M3/7", str(tmp_path / "absent")):
            with pytest.raises(InputError, match=r"cannot be loaded") as info:
                load_product(uri)
            assert repr(uri) in str(info.value)
        with pytest.raises(InputError, match="not a greylab press or drive model"):
            load_product(str(tmp_path / "plain"))


# -- registry: MLflow and in memory ------------------------------------------------------------
def test_versions_and_tags_in_mlflow_and_in_memory(store: dict[str, Any]) -> None:
    tracker, memory, name = store["tracker"], InMemoryTracker(), "press-twice"
    run_id = store["press"]["run_id"]
    source = f"runs:/{run_id}/model"
    for target in (tracker, memory):
        first: dict[str, Any] = {"greylab.verdict": "passes", "n": 3}
        assert target.register_model(name, source, run_id, first, "first") == "1"
        second = {"greylab.verdict": "rejected"}
        assert target.register_model(name, source, run_id, second, "second") == "2"
        target.set_model_version_tags(name, "1", {"greylab.verdict": "superseded", "x": 1.5})
    expected = {"1": {"greylab.verdict": "superseded", "n": "3", "x": "1.5"},
                "2": {"greylab.verdict": "rejected"}}  # fmt: skip
    for version, tags in expected.items():
        stored = tracker.client.get_model_version(name, version)
        kept = memory.models[name][int(version) - 1]
        assert stored.tags == tags == kept["tags"], version
        assert stored.run_id == run_id == kept["run_id"]
        assert stored.description == kept["description"] == {"1": "first", "2": "second"}[version]
    assert [v["version"] for v in memory.models[name]] == ["1", "2"]

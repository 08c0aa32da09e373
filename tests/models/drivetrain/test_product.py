"""The identified drive model as a product: simulation, recording checks, validation metrics,
serialisation, and the model a search hands over."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from methods.errors import InputError
from models.drivetrain import REFERENCE_STRUCTURE, reference_recording
from models.drivetrain.gp import GPSettings, IdentificationSettings, StructureSearch
from models.drivetrain.gp.presets import emps_settings
from models.drivetrain.gp.signals import integral
from models.drivetrain.product import DT_RTOL, DriveModel, check_recording, validate
from models.drivetrain.simulate import simulate
from models.drivetrain.submodels import parameter_specs
from schemas.errors import DataError

NOMINAL = {s.name: s.nominal for k in REFERENCE_STRUCTURE for s in parameter_specs(k)}


@pytest.fixture(scope="module")
def true_model() -> DriveModel:
    # the reference recording is the open-loop response of the reference structure at its
    # nominal parameters (models/drivetrain/excitation.py): that model is the truth
    return DriveModel(structure=REFERENCE_STRUCTURE, parameters=NOMINAL, dt=1e-3)


@pytest.fixture(scope="module")
def clean() -> pd.DataFrame:
    return reference_recording()


def test_true_model_reproduces_its_recording(true_model, clean):
    result = validate(true_model, clean, source="reference")
    for name, column in (("velocity", "velocity_rad_s"), ("position", "position_rad")):
        m = result.metrics[name]
        scale = float(np.ptp(clean[column]))
        # same RK4 scheme and input; native vs interpreted CasADi code differ by rounding only
        assert m["rmse"] <= 1e-12 * scale and m["max_abs"] <= 1e-11 * scale, name
        assert m["r2"] == pytest.approx(1.0, abs=1e-12) and m["n"] == len(clean)
    np.testing.assert_allclose(result.simulated_velocity, clean["velocity_rad_s"], atol=1e-12)


def test_rmse_of_the_true_model_is_the_noise_std(true_model, clean):
    rng = np.random.default_rng(12)
    sigma = 0.01 * float(np.ptp(clean["velocity_rad_s"]))
    noise = rng.normal(0.0, sigma, len(clean))
    noise[0] = 0.0  # the first sample is the initial state: keep it exact, the rest is noise
    noisy = clean.assign(velocity_rad_s=clean["velocity_rad_s"] + noise)
    m = validate(true_model, noisy).metrics
    # exact: the simulation is the noise-free truth, so the error is the noise realisation
    assert m["velocity"]["rmse"] == pytest.approx(np.sqrt(np.mean(noise**2)), rel=1e-9)
    # statistical: the RMS of N = 2001 iid N(0, sigma^2) has relative std 1/sqrt(2N) = 1.6 %;
    # 4 standard deviations (6.3 %) fail a correct implementation with probability < 1e-4
    assert m["velocity"]["rmse"] == pytest.approx(sigma, rel=4 / math.sqrt(2 * len(clean)))
    assert m["position"]["rmse"] <= 1e-12 * float(np.ptp(clean["position_rad"]))


def test_wrong_parameters_explain_less(true_model, clean):
    wrong = DriveModel(structure=REFERENCE_STRUCTURE, dt=1e-3,
                       parameters={**NOMINAL, "J1": 1.3 * NOMINAL["J1"],
                                   "M_C": 0.7 * NOMINAL["M_C"]})  # fmt: skip
    good, bad = validate(true_model, clean).metrics, validate(wrong, clean).metrics
    for name in ("velocity", "position"):
        assert bad[name]["r2"] < good[name]["r2"] - 1e-3
        assert bad[name]["rmse"] > good[name]["rmse"]
        # the fit index and R^2 are one statistic: r2 = 1 - (1 - fit/100)^2
        assert bad[name]["r2"] == pytest.approx(1 - (1 - bad[name]["fit"] / 100) ** 2)


def test_initial_state_is_the_first_sample():
    # one mass: position does not enter the dynamics, so the tail of a recording simulated
    # from its first sample (velocity != 0, position != 0) is the tail of the whole one
    structure, params = ("one_mass", "coulomb", "viscous"), {"J1": 0.012, "M_C": 0.25, "f_v": 0.015}
    model = DriveModel(structure=structure, parameters=params, dt=1e-3)
    whole = reference_recording(structure, params).assign(position_rad=lambda f: f.position_rad + 3)
    tail = whole.iloc[300:].reset_index(drop=True)
    assert abs(tail["velocity_rad_s"].iloc[0]) > 1.0 and tail["position_rad"].iloc[0] > 3.0
    result = validate(model, tail)
    for name in ("velocity", "position"):
        assert result.metrics[name]["r2"] == pytest.approx(1.0, abs=1e-12), name


def test_simulate_follows_the_search_conventions(true_model, clean):
    u = clean["torque_Nm"].to_numpy()
    velocity, position = true_model.simulate(u, velocity0=0.5, position0=-2.0)
    expected = simulate(REFERENCE_STRUCTURE, u, 1e-3, NOMINAL, y0=0.5)
    np.testing.assert_allclose(velocity, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(position, integral(expected, 1e-3) - 2.0, rtol=1e-12, atol=1e-12)
    with pytest.raises(InputError, match="finite"):
        true_model.simulate(np.r_[u[:5], np.nan])


def test_sample_time_must_match_the_model(true_model, clean):
    slow = clean.assign(t_s=clean["t_s"] * 2.0)
    with pytest.raises(DataError) as info:
        check_recording(true_model, slow, source="lab.csv")
    for part in ("lab.csv", "0.002", "0.001", "sample time"):
        assert part in str(info.value)
    within = clean.assign(t_s=clean["t_s"] * (1 + 0.5 * DT_RTOL))
    assert len(check_recording(true_model, within)) == len(clean)


def test_missing_columns_and_nan_name_the_field(true_model, clean):
    with pytest.raises(DataError, match="torque_Nm"):
        validate(true_model, clean.drop(columns=["torque_Nm"]), source="lab.csv")
    bad = clean.copy()
    bad.loc[7, "velocity_rad_s"] = np.nan
    with pytest.raises(InputError, match=r"velocity_rad_s' at row 7"):
        validate(true_model, bad, source="lab.csv")
    with pytest.raises(InputError, match="table"):
        validate(true_model, clean.to_numpy(), source="lab.csv")


def test_position_is_optional(true_model, clean):
    result = validate(true_model, clean.drop(columns=["position_rad"]))
    assert set(result.metrics) == {"velocity"} and result.simulated_position is None
    with pytest.raises(DataError, match="position_rad"):
        check_recording(true_model, clean.drop(columns=["position_rad"]), need_position=True)


def test_validation_summary_dict_and_figure(true_model, clean):
    result = validate(true_model, clean, source="reference")
    plain = json.loads(json.dumps(result.to_dict()))
    assert plain["metrics"]["position"]["n"] == len(clean) and plain["source"] == "reference"
    assert "position" in result.summary() and "R^2" in result.summary()
    fig = result.figure()
    assert len(fig.axes) == 2 and "R²" in fig.axes[0].get_legend().get_texts()[1].get_text()


def test_round_trip_through_json():
    model = DriveModel.from_settings(
        ("gravity", 1, "viscous", "coulomb"), {"J1": 95.0, "M_C": 20.0, "f_v": 200.0, "M_G": 3.0},
        emps_settings(), 0.01, source="EMPS",
    )  # fmt: skip
    assert model.structure == ("one_mass", "coulomb", "viscous", "gravity")
    assert model.units == "prismatic" and model.position_weight == 1.0
    again = DriveModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model and again.to_dict() == model.to_dict()
    rotary = DriveModel.from_settings(REFERENCE_STRUCTURE, NOMINAL, GPSettings(), 1e-3)
    assert rotary.units == "rotary" and DriveModel.from_dict(rotary.to_dict()) == rotary


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"structure": ["one_mass", "warp_drive"]}, "warp_drive"),
        ({"structure": ["one_mass", "two_mass"]}, "structure"),
        ({"parameters": {"J1": 0.01, "M_C": 0.2}}, "missing ['f_v']"),
        ({"parameters": {"J1": 0.01, "M_C": 0.2, "f_v": 0.01, "c1": 5.0}}, "unknown ['c1']"),
        ({"parameters": {"J1": float("nan"), "M_C": 0.2, "f_v": 0.01}}, "parameters['J1']"),
        ({"parameters": {"J1": 1.0, "M_C": 0.2, "f_v": 0.01}}, "outside its bounds"),
        ({"dt": float("inf")}, "'dt'"),
        ({"dt": "fast"}, "'dt'"),
        ({"units": "furlongs"}, "'units'"),
        ({"bounds": {"M_C": [1.0]}}, "bounds['M_C']"),
        ({"wheels": 4}, "unknown field(s) ['wheels']"),
        ({"parameters": None}, "'parameters'"),
    ],
)
def test_from_dict_names_the_bad_field(change, field):
    good = DriveModel(structure=("one_mass", "coulomb", "viscous"), dt=1e-3,
                      parameters={"J1": 0.01, "M_C": 0.2, "f_v": 0.01}).to_dict()  # fmt: skip
    with pytest.raises(InputError) as info:
        DriveModel.from_dict({**good, **change})
    assert field in str(info.value)
    with pytest.raises(InputError, match=r"missing field\(s\) \['dt'\]"):
        DriveModel.from_dict({k: v for k, v in good.items() if k != "dt"})


def test_from_search_reproduces_the_best_output():
    recording = reference_recording(("one_mass", "coulomb", "viscous"), {"J1": 0.012})
    quick = IdentificationSettings(n_starts=1, max_nfev=6, screen_nfev=3)
    settings = GPSettings(allowed=("one_mass", "two_mass", "coulomb", "viscous"),
                          max_nodes=3, init_max_nodes=2, identification=quick)  # fmt: skip
    search = StructureSearch(3, 2, seed=1, settings=settings).fit(recording)
    model = DriveModel.from_search(search)
    assert list(model.structure) == search.best_structure_ and model.dt == pytest.approx(1e-3)
    assert model.parameters == search.best_parameters_ and model.units == "rotary"
    velocity, _ = model.simulate(recording["torque_Nm"], velocity0=recording["velocity_rad_s"][0])
    # native (this model) vs interpreted (the search's best_output_) code: rounding only
    np.testing.assert_allclose(velocity, search.best_output_, rtol=1e-10, atol=1e-12)
    assert DriveModel.from_search(search, source="lab 3").source == "lab 3"
    with pytest.raises(InputError, match="fitted"):
        DriveModel.from_search(StructureSearch())

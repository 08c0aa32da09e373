from __future__ import annotations

import json

import numpy as np
import pytest

from methods import InputError, correct_to_setpoints, fit_parameters
from methods.press.lsq.core import compile_model
from models.press import M3, TRUE_STIFFNESS, PressModel, simulate_press
from tests.methods.press.helpers import Decay, Linear, table_from


def test_linear_model_has_c_equal_c1_despite_residuals() -> None:
    rng = np.random.default_rng(1)
    q = np.linspace(0.0, 100.0, 20)
    h = Linear().response([2.0, 3.0], q)
    z = h[None] + rng.normal(size=(3, 20, 2)) * [0.5, 0.3] + 0.7  # nonzero residuals
    fit = fit_parameters(Linear(), table_from(z, q, Linear.sensors), sigma={"y1": 0.5, "y2": 0.3})
    assert fit.success
    # S = 0 exactly for a linear model: C and C1 agree to rounding
    np.testing.assert_allclose(fit.covariance, fit.covariance_first_order, rtol=1e-10)


def test_zero_residuals_give_c_equal_c1_and_exact_truth() -> None:
    q = M3.default_forces
    p_true = [TRUE_STIFFNESS["k5"], TRUE_STIFFNESS["k7"]]
    z = np.repeat(M3.response(p_true, q)[None], 2, axis=0)
    fit = fit_parameters(M3, table_from(z, q, M3.sensors), sigma=M3.nominal_sigma)
    np.testing.assert_allclose(fit.values, p_true, rtol=1e-9)
    # residuals ~1e-12 um: S negligible, C == C1 to 1e-7
    np.testing.assert_allclose(fit.covariance, fit.covariance_first_order, rtol=1e-7)
    np.testing.assert_allclose(fit.covariance, fit.covariance.T, rtol=0, atol=0)


def test_second_order_term_matches_hand_derivatives() -> None:
    # y = a exp(-b t): d2y/da2 = 0, d2y/dadb = -t e, d2y/db2 = a t^2 e (e = exp(-b t))
    t = np.linspace(0.0, 2.0, 7)
    a, b = 1.3, 0.7
    v = np.random.default_rng(3).normal(size=7)
    comp = compile_model(Decay(), 7)
    S = comp.eval_S(np.array([a, b]), t, v)
    e = np.exp(-b * t)
    expect = np.array([[0.0, -(v * t * e).sum()], [-(v * t * e).sum(), (v * a * t**2 * e).sum()]])
    np.testing.assert_allclose(S, expect, rtol=1e-12, atol=1e-14)
    _, J = comp.eval_hJ(np.array([a, b]), t)
    np.testing.assert_allclose(J, np.column_stack([e, -a * t * e]), rtol=1e-12)


def test_fit_covariance_is_bard_formula() -> None:
    t = np.linspace(0.0, 3.0, 12)
    z = (np.exp(-t) - 0.4)[None, :, None]  # misspecified: large systematic residuals
    sigma = 0.02
    fit = fit_parameters(Decay(), table_from(z, t, ["y"]), sigma={"y": sigma})
    a, b = fit.values
    e = np.exp(-b * t)
    r = (a * e - z[0, :, 0]) / sigma
    J = np.column_stack([e, -a * t * e]) / sigma
    S = (
        np.array([[0.0, -(r * t * e).sum()], [-(r * t * e).sum(), (r * a * t**2 * e).sum()]])
        / sigma
    )
    M = J.T @ J
    A_inv = np.linalg.inv(M + S)
    np.testing.assert_allclose(fit.covariance, A_inv @ M @ A_inv, rtol=1e-6)
    np.testing.assert_allclose(fit.covariance_first_order, np.linalg.inv(M), rtol=1e-6)
    # here the second-order term matters: C is far from C1
    assert np.trace(fit.covariance) < 0.5 * np.trace(fit.covariance_first_order)


def test_recovers_truth_within_noise(twin_m3) -> None:
    table, sheet = twin_m3
    fit = fit_parameters(M3, table, sensors=["D_vertical", "F_horizontal"], sigma=sheet)
    assert fit.success and fit.identifiable
    z = (fit.values - [TRUE_STIFFNESS["k5"], TRUE_STIFFNESS["k7"]]) / np.sqrt(
        np.diag(fit.covariance)
    )
    # 4 standard errors: P(|N(0,1)| > 4) = 6e-5; the correction to setpoints adds a bias
    # far below one standard error (force scatter / step spacing ~ 1 %)
    assert np.all(np.abs(z) < 4.0), z
    d = fit.to_dict()
    json.dumps(d)
    assert d["sigma_source"] == "sheet" and fit.ellipsoid(0.95).contains(fit.values)


def test_estimates_friction_parameter_too() -> None:
    table, sheet = simulate_press("M3", seed=4)
    model = PressModel("M3", mu=0.02, estimate_friction=True)  # start away from mu = 0.03
    fit = fit_parameters(model, correct_to_setpoints(table), sigma=sheet)
    assert list(fit.parameters) == ["k5", "k7", "mu"]
    se = fit.standard_errors["mu"]
    assert fit.success and abs(fit.parameters["mu"] - 0.03) < 4 * se, (fit.parameters, se)


def test_unidentifiable_design_is_flagged_not_raised(twin_m3) -> None:
    table, _ = twin_m3
    fit = fit_parameters(M3, table, sensors=["D_vertical", "B0_vertical"])
    assert (not fit.identifiable and np.isinf(fit.condition)) or fit.condition > 1e12
    assert any("not identifiable" in w for w in fit.warnings)
    with pytest.raises(InputError, match="not finite"):
        fit.ellipsoid()


def test_uncorrected_table_is_warned_about() -> None:
    table, _ = simulate_press("M3", seed=2)
    fit = fit_parameters(M3, table)
    assert any("correct_to_setpoints" in w for w in fit.warnings)


def test_input_errors_are_clear(twin_m3) -> None:
    table, _ = twin_m3
    with pytest.raises(InputError, match="not in model"):
        fit_parameters(M3, table, sensors=["D_vertical", "Z_nowhere"])
    with pytest.raises(InputError, match="usable residuals"):
        fit_parameters(
            M3, table, sensors=["D_vertical"], steps=[0], series=[0], sigma={"D_vertical": 1}
        )
    with pytest.raises(InputError, match="steps"):
        fit_parameters(M3, table, steps=[99])

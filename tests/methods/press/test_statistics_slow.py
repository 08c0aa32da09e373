"""Statistical properties by simulation (slow): covariance accuracy, size and power."""

from __future__ import annotations

import numpy as np
import pytest

from methods import correct_to_setpoints, detect_model_uncertainty, fit_parameters
from models.press import M2, M3, simulate_press
from tests.methods.press.helpers import Decay, table_from


@pytest.mark.slow
def test_second_order_covariance_matches_empirical_covariance() -> None:
    # y = a exp(-b t) fitted to data with an offset the model lacks: large systematic
    # residuals + curvature, so C and C1 differ by a factor ~3.6 in trace
    rng = np.random.default_rng(2024)
    t = np.linspace(0.0, 3.0, 12)
    truth = np.exp(-t) - 0.4
    sigma = {"y": 0.02}
    ref = fit_parameters(Decay(), table_from(truth[None, :, None], t, ["y"]), sigma=sigma)
    n_rep = 600
    est = np.empty((n_rep, 2))
    for r in range(n_rep):
        z = truth + 0.02 * rng.normal(size=t.size)
        fit = fit_parameters(Decay(), table_from(z[None, :, None], t, ["y"]), sigma=sigma)
        assert fit.success
        est[r] = fit.values
    emp = np.trace(np.cov(est.T))
    c, c1 = np.trace(ref.covariance), np.trace(ref.covariance_first_order)
    # 600 replicates: the empirical trace has ~6 % relative sd (dominant variance), so 15 %
    # is ~2.5 sd; C1 is off by > 100 %
    assert abs(c / emp - 1) < 0.15, (c, emp)
    assert abs(c - emp) < abs(c1 - emp) and abs(c1 / emp - 1) > 1.0


@pytest.mark.slow
def test_default_statistic_is_calibrated_and_powerful() -> None:
    n_exp, n_tests, tol = 200, 20, 0.05
    rejected_true = rejected_wrong = 0
    for e in range(n_exp):
        table = correct_to_setpoints(simulate_press("M3", seed=5000 + e)[0])
        kw = {"n_tests": n_tests, "seed": e, "sensors": ["D_vertical", "F_horizontal"]}
        rejected_true += detect_model_uncertainty(M3, table, **kw).rejected
        if e < 40:  # power is ~1: a few experiments suffice
            rejected_wrong += detect_model_uncertainty(M2, table, **kw).rejected
    rate = rejected_true / n_exp
    # family-wise error <= TOL up to Monte-Carlo error (binomial, 3 sd)
    assert rate <= tol + 3 * np.sqrt(tol * (1 - tol) / n_exp), rate
    assert rejected_wrong / 40 >= 0.9

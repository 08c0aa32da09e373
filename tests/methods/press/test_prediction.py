"""Predictions of a calibrated press model (delta-method std) and their validation on new data."""

from __future__ import annotations

import json
from typing import ClassVar

import casadi as ca
import numpy as np
import pytest

from methods import InputError, correct_to_setpoints, fit_parameters
from methods.press import PressValidation, predict_displacements, validate_predictions
from methods.press.uncertainty.prediction import Z95
from methods.validation import output_metrics
from models.press import M1, M3, simulate_press
from tests.methods.press.helpers import table_from


class LinearInP:
    """y_k(q) = sum_i X_k,i(q) p_i, two sensors, three parameters: J = X exactly."""

    name = "linear3"
    sensors = ("a", "b")
    parameters: ClassVar[dict] = {"p0": 1.0, "p1": -2.0, "p2": 0.5}

    @staticmethod
    def design(q):
        """Regressors (n_q rows per sensor): sensor a [q, 1, q^2/1e4], sensor b [0, q, 1]."""
        return [[q, 1.0, q * q / 1e4], [0.0 * q, q, 1.0 + 0.0 * q]]

    def response(self, p, forces):
        (a, b) = self.design(forces)
        ya = a[0] * p[0] + a[1] * p[1] + a[2] * p[2]
        yb = b[0] * p[0] + b[1] * p[1] + b[2] * p[2]
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            return ca.horzcat(ya, yb)
        return np.column_stack([ya, yb])


def _random_covariance(rng: np.random.Generator, n: int) -> np.ndarray:
    L = rng.normal(size=(n, n)) * np.array([1.0, 0.1, 10.0])  # mixed parameter scales
    return L @ L.T


def test_delta_method_is_exact_for_a_model_linear_in_its_parameters() -> None:
    rng = np.random.default_rng(11)
    model = LinearInP()
    q = rng.uniform(-5e3, 5e3, size=17)
    p = dict(zip(model.parameters, rng.normal(size=3)))
    C = _random_covariance(rng, 3)
    pred = predict_displacements(model, p, C, q)
    for k, X in enumerate(model.design(q)):
        X = np.column_stack([np.broadcast_to(np.asarray(c, float), q.shape) for c in X])
        # rounding only: entries of X C X^T ~1e2..1e9, evaluated in a different order
        np.testing.assert_allclose(pred.mean[:, k], X @ np.array(list(p.values())), rtol=1e-12)
        np.testing.assert_allclose(pred.std[:, k], np.sqrt(np.diag(X @ C @ X.T)), rtol=1e-10)
    # sensor subset/order and parameter order given differently: same numbers
    shuffled = {n: p[n] for n in ("p2", "p0", "p1")}
    sub = predict_displacements(model, shuffled, C, q, sensors=["b"])
    np.testing.assert_array_equal(sub.std[:, 0], pred.std[:, 1])
    assert predict_displacements(model, p, np.zeros((3, 3)), q).std.max() == 0.0


def test_prediction_follows_the_ordered_scenario(twin_m3) -> None:
    table, sheet = twin_m3
    fit = fit_parameters(M3, table, sigma=sheet)
    q = M3.default_forces
    pred = predict_displacements(M3, fit.parameters, fit.covariance, q)
    np.testing.assert_allclose(pred.mean, M3.response(fit.values, q), rtol=1e-12)
    # hysteresis: the same forces in another order give another response at the same force
    rev = predict_displacements(M3, fit.parameters, fit.covariance, q[::-1])
    assert np.abs(rev.mean[::-1] - pred.mean).max() > 0.1
    frame = pred.to_frame()
    assert list(frame.columns) == ["step", "force_N", "sensor", "displacement_um", "std_um"]
    assert len(frame) == q.size * 3 and (frame["std_um"] > 0).all()
    json.dumps(pred.to_dict())


@pytest.mark.slow
def test_delta_method_std_matches_spread_over_replicate_fits() -> None:
    q = M3.default_forces
    n_rep = 200
    means = np.empty((n_rep, q.size, 3))
    stds = np.empty_like(means)
    for r in range(n_rep):
        table, sheet = simulate_press("M3", seed=7000 + r)
        fit = fit_parameters(M3, correct_to_setpoints(table), sigma=sheet)
        assert fit.success
        pred = predict_displacements(M3, fit.parameters, fit.covariance, q)
        means[r], stds[r] = pred.mean, pred.std
    empirical = means.std(axis=0, ddof=1)
    # the sample std of 200 replicates has relative sd 1/sqrt(2 * 199) = 5 %: 15 % is 3 sd
    # (on the twin every prediction's error is a multiple of one of two compliances' errors,
    # so the 87 ratios are two independent comparisons, not 87)
    ratio = stds[0] / empirical
    assert np.abs(ratio - 1).max() < 0.15, (ratio.min(), ratio.max())
    # the delta-method std hardly depends on which replicate's estimate it is taken at
    np.testing.assert_allclose(stds, np.broadcast_to(stds[0], stds.shape), rtol=1e-3)


def _calibrated(model, seed: int):
    table, sheet = simulate_press("M3", seed=seed)
    fit = fit_parameters(model, correct_to_setpoints(table), sigma=sheet)
    assert fit.success
    return fit


def test_validation_is_calibrated_for_the_true_model_and_not_for_a_wrong_one() -> None:
    fresh, _ = simulate_press("M3", seed=902)  # raw lab table: forces scatter
    fit3, fit1 = _calibrated(M3, 901), _calibrated(M1, 901)
    v3 = validate_predictions(M3, fit3.parameters, fit3.covariance, fit3.sigma, fresh)
    v1 = validate_predictions(M1, fit1.parameters, fit1.covariance, fit1.sigma, fresh)
    assert v3.corrected and v3.n_series == 6 and v3.n_steps == 29
    n = 6 * 29 * 3
    # binomial: share of n = 522 measurements outside the band has sd sqrt(.05 .95 / n) =
    # 0.0095; 3 sd (over 200 simulated pairs the share had mean 0.047, sd 0.0096: the
    # correction to setpoints shrinks the noise by ~2 %)
    assert abs(v3.outside_band_all - 0.05) < 3 * np.sqrt(0.05 * 0.95 / n), v3.outside_band_all
    e = v3.residuals["normalised"].to_numpy()
    # pooled over 522 values: mean sd ~0.06 (noise 0.044 and the shared parameter error),
    # std sd 1/sqrt(2 n) = 0.031; 4 sd each
    assert abs(e.mean()) < 0.25 and abs(e.std() - 1) < 0.13
    for s in v3.sensors:  # per sensor: 174 values, mean sd ~0.1, std sd ~0.055; ~4 sd
        assert abs(v3.normalised_mean[s]) < 0.4 and abs(v3.normalised_std[s] - 1) < 0.22
        # RMSE = sigma up to sampling (chi-square with 174 dof: 5.4 % sd of the rmse)
        assert abs(v3.metrics[s]["rmse"] / v3.sigma[s] - 1) < 0.2
    # M1 misses the friction loop: far more outside (29.5 % here, 4.2 % for M3), worse R^2 on every sensor
    assert v1.outside_band_all > 0.15 and v1.outside_band_all > 3 * v3.outside_band_all
    assert all(v1.metrics[s]["r2"] < v3.metrics[s]["r2"] for s in v3.sensors)
    assert v1.normalised_std["D_vertical"] > 2.0


def test_validation_tables_and_correction(twin_m3) -> None:
    table, sheet = twin_m3  # already corrected
    fit = fit_parameters(M3, table, sensors=["D_vertical", "F_horizontal"], sigma=sheet)
    raw, _ = simulate_press("M3", seed=77)
    v = validate_predictions(M3, fit.parameters, fit.covariance, fit.sigma, raw)
    assert v.sensors == ("D_vertical", "F_horizontal")  # default: those with a sigma
    again = validate_predictions(
        M3, fit.parameters, fit.covariance, sheet, correct_to_setpoints(raw), v.sensors
    )
    assert v.corrected and not again.corrected
    assert v.to_dict() | {"corrected": False} == again.to_dict()
    r = v.residuals
    assert len(r) == 6 * 29 * 2
    sig = r["sensor"].map(v.sigma).to_numpy(float)
    band = np.sqrt(sig**2 + r["std_um"].to_numpy() ** 2)
    expected = (r["measured"] - r["predicted"]).to_numpy() / band
    np.testing.assert_allclose(r["normalised"], expected, rtol=1e-12)
    d = r[r["sensor"] == "D_vertical"]
    m = output_metrics(d["measured"], d["predicted"])
    assert m == pytest.approx(v.metrics["D_vertical"], rel=1e-12)
    assert v.outside_band["D_vertical"] == pytest.approx((d["normalised"].abs() > Z95).mean())
    assert "outside the 95 % prediction band" in v.summary()
    with pytest.raises(InputError, match="force_N differs"):
        validate_predictions(M3, fit.parameters, fit.covariance, sheet, raw, correct=False)


def test_to_dict_turns_undefined_metrics_into_none() -> None:
    # one series, one step: R^2, fit index and the std of e are undefined (NaN)
    model = LinearInP()
    table = table_from(np.array([[[1.0, 2.0]]]), np.array([100.0]), list(model.sensors))
    v = validate_predictions(model, model.parameters, np.eye(3), {"a": 1.0, "b": 1.0}, table)
    assert isinstance(v, PressValidation)
    d = json.loads(json.dumps(v.to_dict()))
    assert d["metrics"]["a"]["r2"] is None and d["normalised_std"]["b"] is None
    assert d["metrics"]["a"]["n"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"covariance": np.eye(3)}, "covariance: shape"),
        ({"covariance": [[1.0, 0.5], [0.0, 1.0]]}, "covariance: not symmetric"),
        ({"covariance": [[1.0, 2.0], [2.0, 1.0]]}, "covariance: not positive semi-definite"),
        ({"covariance": [[np.nan, 0.0], [0.0, 1.0]]}, "covariance: has non-finite"),
        ({"sensors": ["D_vertical", "Z_gauge"]}, "sensors: .*Z_gauge"),
        ({"forces": [1e4, np.inf, 2e4]}, "forces: step 1"),
        ({"forces": []}, "forces: need a 1-D scenario"),
        ({"parameters": {"k5": 5e3}}, r"parameters: .*missing \['k7'\]"),
        ({"parameters": {"k5": 5e3, "k7": 3e3, "mu": 0.1}}, r"unknown \['mu'\]"),
        ({"parameters": {"k5": 5e3, "k7": np.nan}}, "parameters: values must be finite"),
    ],
)
def test_prediction_refuses_bad_input(change: dict, field: str) -> None:
    kw = {
        "parameters": {"k5": 5e3, "k7": 3e3},
        "covariance": np.diag([100.0, 50.0]),
        "forces": M3.default_forces,
        "sensors": None,
    } | change
    with pytest.raises(InputError, match=field):
        predict_displacements(M3, **kw)


def test_validation_refuses_bad_tables(twin_m3) -> None:
    table, sheet = twin_m3
    p, C = {"k5": 5e3, "k7": 3e3}, np.diag([100.0, 50.0])
    with pytest.raises(InputError, match=r"table: lacks column\(s\) \['force_N'\]"):
        validate_predictions(M3, p, C, sheet, table.drop(columns="force_N"))
    bad = table.copy()
    bad.loc[7, "displacement_um"] = np.nan
    with pytest.raises(InputError, match=r"table: column displacement_um .* row 7"):
        validate_predictions(M3, p, C, sheet, bad)
    with pytest.raises(InputError, match="sigma lacks sensor"):
        validate_predictions(M3, p, C, {"D_vertical": 0.5}, table, sensors=["F_horizontal"])
    with pytest.raises(InputError, match="not in the table"):
        validate_predictions(M3, p, C, sheet, table[table["sensor"] != "B0_vertical"],
                             sensors=["B0_vertical"])  # fmt: skip
    with pytest.raises(InputError, match="sensors: none of the model's sensors"):
        validate_predictions(M3, p, C, {"X": 1.0}, table)


def test_validation_figure_renders(twin_m3, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from methods.press.plots import validation_figure

    table, sheet = twin_m3
    fit = fit_parameters(M3, table, sigma=sheet)
    v = validate_predictions(M3, fit.parameters, fit.covariance, fit.sigma, table)
    fig = validation_figure(v)
    fig.savefig(tmp_path / "validation.png")
    assert len(fig.axes) == 6 and (tmp_path / "validation.png").stat().st_size > 1000

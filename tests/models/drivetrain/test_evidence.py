"""Oracles of the evidence statistics (models.drivetrain.evidence): linear regression as the
exact case, coverage and test rates checked by simulation against binomial bands."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from models.drivetrain.evidence import (
    f_test,
    information,
    parameter_uncertainty,
    residual_analysis,
    rival_table,
)
from models.drivetrain.gp.signals import lowpass


def _binomial_low(n: int, p: float, q: float = 1e-4) -> int:
    """Lowest count of successes a correct procedure with rate ``p`` reaches, except with
    probability ``q`` (so a correct implementation fails this test once in 1e4 runs)."""
    return int(stats.binom.ppf(q, n, p))


def test_linear_regression_standard_errors_are_the_textbook_ones() -> None:
    # oracle: for y = X b + e the linearised covariance is exactly s^2 (X^T X)^-1
    rng = np.random.default_rng(1)
    n = 200
    x = np.column_stack([np.ones(n), rng.normal(size=n), rng.uniform(0, 3, n)])
    b = np.array([1.0, -2.0, 0.5])
    y = x @ b + rng.normal(0, 0.3, n)
    b_hat = np.linalg.lstsq(x, y, rcond=None)[0]
    e = x @ b_hat - y
    s2 = e @ e / (n - 3)
    expected = np.sqrt(np.diag(s2 * np.linalg.inv(x.T @ x)))
    boxes = [(-10.0, 10.0)] * 3
    out, sigma, cond = parameter_uncertainty(x, e, b_hat, ["a", "b", "c"], boxes)
    assert sigma == pytest.approx(math.sqrt(s2), rel=1e-12)
    assert [p.stderr for p in out] == pytest.approx(expected, rel=1e-9)
    t = stats.t.ppf(0.975, n - 3)
    assert out[1].lower == pytest.approx(b_hat[1] - t * expected[1], rel=1e-9)
    assert all(p.identifiable for p in out) and 1 < cond < 1e3


def test_interval_coverage_by_simulation_with_and_without_prefilter() -> None:
    # 400 regressions; the 95 % intervals must cover the truth at the binomial rate (per
    # parameter). With the prefilter the estimator minimises |F(Xb - y)|^2 and the sandwich
    # applies; a smooth regressor keeps the information below the cutoff.
    rng = np.random.default_rng(7)
    n, dt = 400, 1e-3
    t = np.arange(n) * dt
    # the third regressor sits at the cutoff, where F halves it: there the plain
    # s^2 ((FX)^T FX)^-1 is twice too wide (coverage near 100 %), the sandwich is right
    x = np.column_stack([np.sin(2 * np.pi * 3 * t), np.cos(2 * np.pi * 5 * t) + t,
                         np.sin(2 * np.pi * 25 * t)])  # fmt: skip
    b = np.array([2.0, -1.0, 0.5])
    filt = lowpass(25.0, dt)
    assert filt is not None
    for prefilter in (None, filt):
        hits = np.zeros(3, int)
        runs = 400
        for _ in range(runs):
            y = x @ b + rng.normal(0, 0.5, n)
            xf = prefilter(x) if prefilter else x
            yf = prefilter(y) if prefilter else y
            b_hat = np.linalg.lstsq(xf, yf, rcond=None)[0]
            out, _, _ = parameter_uncertainty(x, x @ b_hat - y, b_hat, ["p", "q", "r"],
                                              [(-10, 10)] * 3, prefilter=prefilter)  # fmt: skip
            hits += [p.lower <= bt <= p.upper for p, bt in zip(out, b)]
        low = _binomial_low(runs, 0.95)
        high = runs - _binomial_low(runs, 0.05)
        assert np.all(hits >= low) and np.all(hits <= high), (prefilter, hits, low, high)


def test_simultaneous_intervals_hold_every_value_together_at_the_level() -> None:
    # 6 regressors, 600 regressions: every true value inside its joint (Bonferroni) interval
    # in >= 95 % of runs (binomial band), where all six marginal intervals hold together only
    # about 0.95^6 = 74 % of the time (independent estimates: orthogonal regressors)
    rng = np.random.default_rng(13)
    n, d, runs = 120, 6, 600
    x = np.linalg.qr(rng.normal(size=(n, d)))[0] * 10
    b = rng.normal(size=d)
    joint = marginal = 0
    for _ in range(runs):
        y = x @ b + rng.normal(0, 1.0, n)
        b_hat = np.linalg.lstsq(x, y, rcond=None)[0]
        out, _, _ = parameter_uncertainty(x, x @ b_hat - y, b_hat, list("abcdef"),
                                          [(-100, 100)] * d)  # fmt: skip
        joint += all(p.joint_lower <= bt <= p.joint_upper for p, bt in zip(out, b))
        marginal += all(p.lower <= bt <= p.upper for p, bt in zip(out, b))
    assert joint >= _binomial_low(runs, 0.95), joint
    assert runs - _binomial_low(runs, 1 - 0.95**d) >= marginal >= _binomial_low(runs, 0.95**d)
    assert all(p.joint_lower < p.lower and p.upper < p.joint_upper for p in out)


@pytest.mark.parametrize("filtered", [False, True])
def test_a_start_estimated_from_the_same_noise_is_in_the_covariance(filtered: bool) -> None:
    # oracle: the linear output error y_sim = X b + j0 y0 with y0 = c @ y[:k] estimated from
    # the noisy samples first (as the drive fit's start velocity), then b by least squares.
    # The covariance of b over 3000 noise draws is computed exactly (the estimator is linear);
    # parameter_uncertainty(start=(j0, c)) must give its standard errors, and without the
    # start term they are too small (the decaying start transient looks like the damping)
    rng = np.random.default_rng(5)
    n, dt, k = 400, 1e-3, 20
    t = np.arange(n) * dt
    j0 = np.exp(-t / 0.05)  # a start transient that decays in 50 samples
    x = np.column_stack([np.sin(2 * np.pi * 4 * t), t * np.exp(-t / 0.05) * 20])
    c = np.linalg.pinv(np.vander(np.arange(k, dtype=float), 3, increasing=True))[0]
    prefilter = lowpass(25.0, dt) if filtered else None
    filt = prefilter or (lambda a: a)
    xf = filt(x)
    b = np.array([1.0, 0.5])
    draws, stderrs, plain = [], [], []
    for _ in range(3000):
        y = x @ b + j0 * 0.3 + rng.normal(0, 0.2, n)
        y0 = c @ y[:k]
        b_hat = np.linalg.lstsq(xf, filt(y - j0 * y0), rcond=None)[0]
        draws.append(b_hat)
        if len(stderrs) < 50:
            e = x @ b_hat + j0 * y0 - y
            out, _, _ = parameter_uncertainty(x, e, b_hat, ["p", "q"], [(-10, 10)] * 2,
                                              prefilter=prefilter, start=(j0, c))  # fmt: skip
            stderrs.append([p.stderr for p in out])
            out, _, _ = parameter_uncertainty(x, e, b_hat, ["p", "q"], [(-10, 10)] * 2,
                                              prefilter=prefilter)  # fmt: skip
            plain.append([p.stderr for p in out])
    # within 5 %: the sd of 3000 draws is itself 1.3 % uncertain, the mean of 50 standard
    # errors about 1 % (measured: 1.016 and 0.996 of the sd; without the start term 0.47)
    sd = np.std(draws, axis=0, ddof=1)
    assert np.mean(stderrs, axis=0) == pytest.approx(sd, rel=0.05)
    assert np.mean(plain, axis=0)[1] < 0.8 * sd[1]


@pytest.mark.parametrize("filtered", [False, True])
def test_the_start_term_is_the_exact_covariance_of_a_linear_estimator(filtered: bool) -> None:
    # oracle: b_hat - b = M noise with M = (FX)^+ F (I - j0 c^T) exactly for a linear model,
    # so with s^2 set to sigma^2 the standard errors are sqrt(diag(sigma^2 M M^T)); regressors
    # non-zero at the record's start (where c acts), parameters of unequal scale
    rng = np.random.default_rng(9)
    n, dt, k, sigma = 300, 1e-3, 12, 0.3
    t = np.arange(n) * dt
    x = np.column_stack([1.0 + np.sin(2 * np.pi * 6 * t), 50.0 * np.exp(-t / 0.03)])
    j0 = np.exp(-t / 0.02) + 0.1 * rng.normal(size=n)
    c = np.zeros(n)
    c[:k] = np.linalg.pinv(np.vander(np.arange(k, dtype=float), 3, increasing=True))[0]
    prefilter = lowpass(25.0, dt) if filtered else None
    f = prefilter(np.eye(n)) if prefilter else np.eye(n)
    m = np.linalg.pinv(f @ x) @ f @ (np.eye(n) - np.outer(j0, c))
    expected = np.sqrt(np.diag(sigma**2 * m @ m.T))
    e = np.full(n, sigma * np.sqrt((n - 2) / n))  # s^2 = sigma^2 exactly
    out, _, _ = parameter_uncertainty(x, e, np.array([2.0, -0.004]), ["p", "q"],
                                      [(-10, 10)] * 2, prefilter=prefilter,
                                      start=(j0, c[:k]))  # fmt: skip
    assert [p.stderr for p in out] == pytest.approx(expected, rel=1e-8)
    t_joint = stats.t.ppf(1 - 0.025 / 2, n - 2)  # Bonferroni over the 2 parameters
    assert [(p.joint_upper - p.value) / p.stderr for p in out] == pytest.approx([t_joint] * 2)
    assert [(p.value - p.joint_lower) / p.stderr for p in out] == pytest.approx([t_joint] * 2)


def test_rank_deficient_and_box_wide_parameters_are_flagged() -> None:
    rng = np.random.default_rng(3)
    n = 100
    a = rng.normal(size=n)
    x = np.column_stack([a, a, rng.normal(size=n)])  # the first two cannot be separated
    e = rng.normal(0, 0.1, n)
    out, _, cond = parameter_uncertainty(x, e, np.ones(3), ["a", "b", "c"], [(0.0, 5.0)] * 3)
    assert not out[0].identifiable and not out[1].identifiable and out[2].identifiable
    assert math.isinf(out[0].stderr) and "rank" in out[0].note and cond > 1e8
    # a large noise: the interval of c is wider than its narrow box
    out, _, _ = parameter_uncertainty(x[:, 2:], 10 * e, np.ones(1), ["c"], [(0.9, 1.1)])
    assert not out[0].identifiable and "wider than its box" in out[0].note
    # on a bound: identifiable, but said
    out, _, _ = parameter_uncertainty(x[:, 2:], e, np.ones(1), ["c"], [(1.0, 3.0)])
    assert out[0].identifiable and "bound" in out[0].note


def _smooth(rng: np.random.Generator, n: int) -> np.ndarray:
    """A smooth, strongly autocorrelated input (low-passed noise), as drive torques are."""
    filt = lowpass(20.0, 1e-3)
    assert filt is not None
    return filt(rng.normal(size=n))


def test_residual_tests_pass_white_residuals_at_the_stated_rate() -> None:
    # under H0 (white, independent of u) each test fails at most at rate 1 - confidence
    # (Bonferroni over the lags): 300 runs at 99 % -> both pass in >= 98 % (two tests)
    rng = np.random.default_rng(11)
    runs, n = 300, 2000
    passed = sum(
        bool(residual_analysis(rng.normal(size=n), _smooth(rng, n), confidence=0.99).passed)
        for _ in range(runs)
    )
    assert passed >= _binomial_low(runs, 0.98)


def test_residual_tests_fail_coloured_or_input_correlated_residuals() -> None:
    rng = np.random.default_rng(12)
    n, runs = 2000, 50
    fails_auto = fails_cross = 0
    for _ in range(runs):
        w = rng.normal(size=n)
        ar = np.zeros(n)  # AR(1), phi 0.3: r(1) = 0.3 against a band of about 0.08
        for k in range(1, n):
            ar[k] = 0.3 * ar[k - 1] + w[k]
        u = _smooth(rng, n)
        fails_auto += not residual_analysis(ar, u).autocorrelation.passed
        leak = w + 0.5 * np.roll(u, 3) / u.std()  # the input leaks into the residual
        fails_cross += not residual_analysis(leak, u).cross_correlation.passed
    assert fails_auto == runs and fails_cross == runs


def test_an_exact_fit_is_not_tested() -> None:
    rng = np.random.default_rng(2)
    y = rng.normal(size=500)
    out = residual_analysis(1e-9 * rng.normal(size=500), rng.normal(size=500), output=y)
    assert out.exact_fit and out.passed is None


def test_information_criteria_and_f_test_formulas() -> None:
    aic, bic = information(2.0, 100, 3)
    assert aic == pytest.approx(100 * math.log(0.02) + 6)
    assert bic == pytest.approx(100 * math.log(0.02) + 3 * math.log(100))
    f, p = f_test(10.0, 2, 8.0, 3, 50)
    assert f == pytest.approx((2.0 / 1) / (8.0 / 47))
    assert p == pytest.approx(stats.f.sf(f, 1, 47))
    assert f_test(8.0, 2, 9.0, 3, 50) == (0.0, 1.0)  # the richer fits worse: no support


def _poly_rss(x: np.ndarray, y: np.ndarray, degree: int) -> float:
    coef = np.polynomial.polynomial.polyfit(x, y, degree)
    r = np.polynomial.polynomial.polyval(x, coef) - y
    return float(r @ r)


@pytest.mark.parametrize("true_degree", [1, 2])
def test_rival_table_chooses_the_truth_on_nested_simulated_data(true_degree: int) -> None:
    # nested polynomials (degree d, d-1, d+1) as best / simpler / richer: the rule must pick
    # the true degree in >= 90 % whichever row the search called best (the richer one wins
    # only with an F-test behind it, the simpler one when BIC says the extra term is noise)
    rng = np.random.default_rng(20 + true_degree)
    runs, n = 200, 300
    x = np.linspace(-1, 1, n)
    coef = [0.3, 1.0, 0.8][: true_degree + 1]
    right = 0
    for i in range(runs):
        y = np.polynomial.polynomial.polyval(x, coef) + rng.normal(0, 0.3, n)
        called = true_degree + (i % 3) - 1  # the search's answer: truth, one less, one more
        called = max(called, 1)
        rss = {d: _poly_rss(x, y, d) for d in (called - 1, called, called + 1)}
        table = rival_table(
            ((called,), (f"deg{called}",), rss[called], called + 1),
            [((called - 1,), (f"deg{called - 1}",), rss[called - 1], called, "simpler"),
             ((called + 1,), (f"deg{called + 1}",), rss[called + 1], called + 2, "richer")],
            n,
        )  # fmt: skip
        right += table.preferred == (true_degree,)
    assert right >= 0.9 * runs


def test_a_richer_rival_that_fits_worse_is_marked_underfitted() -> None:
    table = rival_table(((1,), ("a",), 1.0, 2), [((2,), ("b",), 2.0, 3, "richer")], 100)
    assert table.rows[1].note and table.rows[1].p_value == 1.0 and table.agrees
    assert table.to_dict()["rows"][0]["f"] is None  # NaN is JSON null
    # an exact fit: a richer rival 1e-13 above it is numerically as exact, not under-fitted
    exact = rival_table(((1,), ("a",), 1e-14, 2), [((2,), ("b",), 1e-13, 3, "richer")], 100,
                        ss=10.0)  # fmt: skip
    assert exact.rows[1].note == "" and exact.agrees


def test_a_richer_rival_needs_the_f_test_even_where_bic_prefers_it() -> None:
    # one extra parameter, n = 300: BIC prefers the richer for F > ln(300) = 5.7, the F-test
    # at 1 % needs F > 6.7; at F = 6.0 the rule keeps the structure
    n, rss_rich = 300, 100.0
    rss_best = rss_rich * (1 + 6.0 / (n - 3))
    table = rival_table(((1,), ("a",), rss_best, 2), [((2,), ("b",), rss_rich, 3, "richer")], n)
    assert table.rows[1].bic < table.rows[0].bic and table.rows[1].p_value > 0.01
    assert table.agrees


def test_filter_adjoint_is_the_transpose_of_the_padded_filter(monkeypatch) -> None:
    # oracle: <F a, b> = <a, F^T b> for the search's prefilter (whose padding makes it far
    # from symmetric at the ends), on a record longer than the full probe (windowed edges)
    from models.drivetrain import intervals as evidence

    rng = np.random.default_rng(5)
    filt = lowpass(25.0, 1e-3)
    assert filt is not None
    n = 6000
    a, b = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    monkeypatch.setattr(evidence, "FULL_ADJOINT", 100)
    windowed, exact = evidence.filter_adjoint(filt, b)
    assert exact and np.sum(filt(a) * b) == pytest.approx(np.sum(a * windowed), rel=1e-10)
    assert not np.allclose(filt(b)[:50], windowed[:50])  # the ends do differ
    # a filter reaching far (0.5 Hz at 1 kHz): approximated, said, bounded work
    slow = lowpass(0.5, 1e-3)
    assert slow is not None
    approx, exact = evidence.filter_adjoint(slow, b)
    assert not exact and np.allclose(approx, slow(b))
    notes: list[str] = []
    x = rng.normal(size=(n, 1))
    evidence.parameter_uncertainty(x, rng.normal(size=n), np.ones(1), ["p"], [(0, 2)],
                                   prefilter=slow, notes=notes)  # fmt: skip
    assert notes and "approximated" in notes[0]


def test_coloured_residuals_count_fewer_effective_samples() -> None:
    # AR(1) residuals with r1 = 0.9 carry the information of N (1 - 0.9) / (1 + 0.9) samples:
    # a richer rival whose 2 % drop in RSS is significant over 2000 white samples is not over
    # the 105 effective ones, and the criteria say so
    from models.drivetrain.structure_fit import effective_samples, widened

    rng = np.random.default_rng(9)
    n = 2000
    ar = np.zeros(n)
    w = rng.normal(size=n)
    for k in range(1, n):
        ar[k] = 0.9 * ar[k - 1] + w[k]
    resid = residual_analysis(ar, rng.normal(size=n))
    m = effective_samples(n, resid)
    r1 = resid.autocorrelation.values[0]
    assert m == pytest.approx(n * (1 - r1) / (1 + r1)) and 80 < m < 140
    assert effective_samples(n, residual_analysis(w, rng.normal(size=n))) == n
    rows = [((2,), ("b",), 98.0, 3, "richer")]
    assert not rival_table(((1,), ("a",), 100.0, 2), rows, n).agrees  # white: supported
    table = rival_table(((1,), ("a",), 100.0, 2), rows, n, n_eff=m)
    assert table.agrees and table.rows[1].p_value > 0.01 and "effective" in table.rule
    (p,) = widened(parameter_uncertainty(np.ones((n, 1)), w, np.ones(1), ["p"],
                                         [(0.0, 2.0)])[0], 3.0)  # fmt: skip
    assert p.upper - p.lower == pytest.approx(3 * 2 * stats.t.ppf(0.975, n - 1) * p.stderr / 3)

"""Fisher's periodic test of a residual (models.drivetrain.periodic) against its exact law and
by simulation, its place in the residual tests, and what a failure tells the user
(fit_evidence.failure_note)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from models.drivetrain.evidence import residual_analysis
from models.drivetrain.fit_evidence import failure_note
from models.drivetrain.periodic import fisher_p, fisher_p_exact, periodic_test

DT = 1e-3


def _tone(n: int, hz: float, amplitude: float, rng: np.random.Generator) -> np.ndarray:
    """White unit noise plus a sinusoid of ``hz`` at a random phase."""
    t = np.arange(n) * DT
    return rng.normal(size=n) + amplitude * np.sin(2 * np.pi * hz * t + rng.uniform(0, 6.3))


@pytest.mark.parametrize("m", [5, 12, 30])
def test_the_p_value_bounds_fishers_exact_law_within_half_its_square(m: int) -> None:
    # oracle: Fisher's exact series (rational arithmetic); Bonferroni: S1 - S2 <= P <= S1 and
    # S2 <= S1^2 / 2
    for g in np.linspace(1.2 / m, 0.95, 25):
        exact, bound = fisher_p_exact(float(g), m), fisher_p(float(g), m)
        assert exact <= bound + 1e-12
        assert bound - exact <= bound**2 / 2 + 1e-12


def test_white_noise_fails_at_the_stated_rate() -> None:
    # under H0 the rejection rate at level alpha is alpha (to alpha^2 / 2): 3000 records of
    # 901 samples, each rate inside its binomial band (two-sided, 1e-4 each side)
    rng = np.random.default_rng(31)
    runs = 3000
    p = np.array([periodic_test(rng.normal(size=901), DT).p_value for _ in range(runs)])
    for alpha in (0.01, 0.05, 0.1):
        lo, hi = stats.binom.ppf([1e-4, 1 - 1e-4], runs, alpha)
        assert lo <= np.sum(p < alpha) <= hi, alpha


def test_a_tone_is_found_at_its_frequency() -> None:
    rng = np.random.default_rng(32)
    for hz in (7.3, 52.6, 180.0):
        q = periodic_test(_tone(900, hz, 0.4, rng), DT)
        assert not q.passed and q.p_value < 1e-4
        assert abs(q.frequency_hz - hz) <= 1.0 / (900 * DT)  # within one Fourier bin


def test_too_short_constant_or_not_finite_residuals_are_not_tested() -> None:
    assert periodic_test(np.ones(8), DT) is None  # 3 Fourier frequencies
    assert periodic_test(np.full(100, 2.0), DT) is None
    assert periodic_test(np.array([0.0, np.nan] * 50), DT) is None


def test_a_tone_the_correlation_tests_miss_fails_the_residual_tests() -> None:
    # the recovery benchmark's case: a mode's sinusoid in the residual, too weak at any one lag
    # for the correlation bands (power share 0.04: correlations <= 0.04 against a family band
    # of about 0.1 at N 900) but concentrated in one bin of the periodogram
    rng = np.random.default_rng(33)
    e, u = _tone(900, 52.6, 0.3, rng), rng.normal(size=900)
    without = residual_analysis(e, u)
    with_dt = residual_analysis(e, u, dt=DT)
    assert without.passed is True and without.periodic is None
    assert with_dt.autocorrelation.passed and with_dt.cross_correlation.passed
    assert with_dt.passed is False and not with_dt.periodic.passed
    assert with_dt.to_dict()["periodic"]["frequency_hz"] == pytest.approx(52.6, abs=1.2)


def test_the_failure_note_names_the_cut_off_that_shows_a_mode_above_the_prefilter() -> None:
    rng = np.random.default_rng(34)
    u = rng.normal(size=900)
    resid = residual_analysis(_tone(900, 52.6, 0.3, rng), u, dt=DT)
    peak = resid.periodic.frequency_hz  # 52.2 Hz: 2 x that rounded up to 2 digits
    above = failure_note(resid, 25.0, DT)
    assert f"periodic component (peak {peak:.4g} Hz" in above and "--prefilter 110" in above
    beyond = failure_note(residual_analysis(_tone(900, 180.0, 0.3, rng), u, dt=DT), 25.0, DT)
    assert "--prefilter 0 (no prefilter)" in beyond  # 2 x 180 Hz lies above fs / 4
    inside = failure_note(residual_analysis(_tone(900, 10.0, 0.3, rng), u, dt=DT), 25.0, DT)
    assert "periodic component (peak 1" in inside and "--prefilter" not in inside
    assert "missing, or misplaced: a mode or a loop near 1" in inside
    unfiltered = failure_note(residual_analysis(_tone(900, 52.6, 0.3, rng), u, dt=DT), 0.0, DT)
    assert "--prefilter" not in unfiltered and "0 Hz prefilter" not in unfiltered
    assert "a mode or a loop near 5" in unfiltered


@pytest.mark.parametrize(
    ("hz", "cut"),
    [(12.0, 24.0), (51.1, 110.0), (55.0, 110.0), (99.0, 200.0), (120.0, 240.0), (126.0, 0.0)],
)
def test_the_suggested_cut_off_keeps_the_margin_and_the_trusted_band(hz: float, cut: float) -> None:
    from models.drivetrain.spectrum import MARGIN, cutoff_above

    got = cutoff_above(hz, DT)
    assert got == cut
    assert got == 0.0 or MARGIN * hz <= got <= 250.0  # at 1 kHz a quarter is 250 Hz


def test_an_exact_fit_has_no_periodic_test_and_widens_nothing() -> None:
    from models.drivetrain.fit_evidence import wider_cutoff

    rng = np.random.default_rng(35)
    y = rng.normal(size=900)
    resid = residual_analysis(1e-9 * _tone(900, 52.6, 5.0, rng), rng.normal(size=900), output=y,
                              dt=DT)  # fmt: skip
    assert resid.exact_fit and resid.passed is None and resid.periodic is None
    assert wider_cutoff(resid, 25.0, DT) is None

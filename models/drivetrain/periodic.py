"""A periodic component hidden in a residual: Fisher's g test on its periodogram
(docs/methods.md §2.9).

The correlation tests of ``models.drivetrain.evidence`` look at lags up to M (25 ms): a
sinusoid a model misses spreads over every lag and can stay inside their bands (on the recovery
benchmark a two-mass machine answered as one mass left its 54 Hz mode in a residual that passed
them). Fisher's test (Fisher 1929; Brockwell & Davis, *Time Series: Theory and Methods*,
§10.2) looks at the whole record at once:

- the periodogram ``I_k = |sum_t e_t exp(-2 pi i k t / N)|^2`` of the mean-removed residual at
  the Fourier frequencies ``k = 1..m``, ``m = (N - 1) // 2`` (no mean, no Nyquist bin);
- ``g = max_k I_k / sum_k I_k``; under "the residual is white Gaussian noise" the ``I_k`` are
  independent exponentials and ``P(g > x) = sum_{j>=1} (-1)^(j-1) C(m, j) (1 - j x)_+^(m-1)``;
- the p-value reported is the first term ``m (1 - x)^(m-1)`` (clipped to 1): an upper bound of
  the exact law (Bonferroni), above it by at most half its square, so a test at level alpha
  is conservative and exact to ``alpha^2 / 2``; the alternating series itself cancels
  catastrophically for the m of a recording (1500 bins for 3 s at 1 kHz).

The peak's frequency is ``k* / (N dt)``, within one bin (``1 / (N dt)``) of a sinusoid's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MIN_BINS = 4  # fewer Fourier frequencies: no test (a record of fewer than 9 samples)


@dataclass(frozen=True)
class PeriodicTest:
    """Fisher's g test of a residual (module docstring). ``frequency_hz``: the periodogram's
    peak; ``share``: its ``g`` (the peak's share of the residual's power over the ``bins``
    Fourier frequencies); ``p_value``: the bound of ``P(g >= share)`` for white noise;
    ``passed``: ``p_value >= 1 - confidence``."""

    frequency_hz: float
    share: float
    p_value: float
    bins: int
    confidence: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return describe(self.to_dict())


def describe(q: Mapping[str, Any]) -> str:
    """``peak 52.6 Hz, 2.04 % of the residual's power, Fisher's p 6e-11`` for a
    :class:`PeriodicTest` or its ``to_dict`` (a stored result): the one wording of the
    evidence's summary, its note, the figure, the CLI and the run page."""
    return (f"peak {float(q['frequency_hz']):.4g} Hz, {100 * float(q['share']):.3g} % of the "
            f"residual's power, Fisher's p {float(q['p_value']):.2g}")  # fmt: skip


def fisher_p(g: float, m: int) -> float:
    """The first term of Fisher's law, ``min(1, m (1 - g)^(m - 1))`` (module docstring)."""
    if g >= 1.0:
        return 0.0
    log_p = math.log(m) + (m - 1) * math.log1p(-g)
    return 1.0 if log_p >= 0.0 else math.exp(log_p)


def fisher_p_exact(g: float, m: int) -> float:
    """Fisher's exact series ``sum_j (-1)^(j-1) C(m, j) (1 - j g)_+^(m-1)`` in exact
    rational arithmetic (for tests and small ``m``: its cost grows with ``1/g`` and ``m``)."""
    from fractions import Fraction

    x = Fraction(g)
    total = Fraction(0)
    for j in range(1, m + 1):
        if j * x >= 1:
            break
        total += (-1) ** (j - 1) * math.comb(m, j) * (1 - j * x) ** (m - 1)
    return float(total)


def periodic_test(residual: np.ndarray, dt: float, confidence: float = 0.99) -> PeriodicTest | None:
    """Fisher's g test of ``residual`` sampled every ``dt`` s (module docstring); None when the
    record is too short (fewer than ``MIN_BINS`` Fourier frequencies) or the residual is
    constant."""
    e = np.asarray(residual, float)
    e = e - float(np.mean(e))
    n = e.size
    m = (n - 1) // 2
    if m < MIN_BINS or not np.all(np.isfinite(e)):
        return None
    power = np.abs(np.fft.rfft(e)[1 : m + 1]) ** 2
    total = float(np.sum(power))
    if not total > 0.0:
        return None
    k = int(np.argmax(power))
    g = float(power[k]) / total
    p = fisher_p(g, m)
    return PeriodicTest(frequency_hz=(k + 1) / (n * dt), share=g, p_value=p, bins=m,
                        confidence=confidence, passed=bool(p >= 1.0 - confidence))  # fmt: skip

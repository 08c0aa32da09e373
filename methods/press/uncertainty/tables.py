"""The press test's extension points as tables: one row per statistic, one per correction.

A statistic row gives the covariance ``V`` of ``d = p_val - p_cal`` it uses (``T = d^T V^-1 d``)
and its null distribution (the p-value ``alpha_min`` of ``T`` with ``n_p`` parameters under a
correct model); a correction row gives the decision rule (p-values and ``tol`` -> rejected and
threshold per test). ``hypothesis`` looks every name up here and refuses an unknown one.

Recipe for a new statistic (a correction likewise): add a member to ``Statistic`` (the CLI's
``--statistic`` choices and the settings form come from it) and its row to ``STATISTICS``:
``covariance`` from the two fits' covariances (stacked arrays), ``p_value`` its null
distribution, vectorised; then a test of its calibration under the true model (as
``test_familywise_error_slow.py``). ``tests/methods/press/test_tables.py`` fails when an enum
member has no row or a row no member, and shows that a new row reaches the split tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

import numpy as np
from scipy import special

from methods.errors import InputError


class Statistic(StrEnum):
    """difference: d'(C_cal + C_val)^-1 d of two independent estimates; paper: d'C_cal^-1 d
    (the paper's, rejects a correct model far too often)."""

    DIFFERENCE = "difference"
    PAPER = "paper"


class Correction(StrEnum):
    """bonferroni: every test at tol / n; holm: Holm's step-down (same family-wise level,
    more power)."""

    BONFERRONI = "bonferroni"
    HOLM = "holm"


@dataclass(frozen=True)
class StatisticRow:
    """``covariance(C_cal, C_val) -> V`` for (n_p, n_p) or stacked (N, n_p, n_p) covariances;
    ``p_value(T, n_p) -> alpha_min`` elementwise for an array of statistics T (N,)."""

    covariance: Callable[[np.ndarray, np.ndarray], np.ndarray]
    p_value: Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class CorrectionRow:
    """``decide(alpha, tol) -> (rejected, threshold)`` per test; ``alpha`` (m,) p-values with
    ``inf`` where a test has none (it never rejects)."""

    decide: Callable[[np.ndarray, float], tuple[np.ndarray, np.ndarray]]


def chi2_p_value(T: np.ndarray, n_p: int) -> np.ndarray:
    """``1 - F_chi2_{n_p}(T)``: under a correct model and disjoint data ``d ~ N(0, V)``."""
    return np.asarray(special.chdtrc(n_p, T), dtype=float)


def bonferroni(alpha: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Every test at ``tol / m``."""
    thr = np.full(alpha.size, tol / alpha.size)
    return alpha < thr, thr


def holm(alpha: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down: sorted ``alpha_(r) < tol / (m - r)``, stop at the first failure."""
    m = alpha.size
    order = np.argsort(alpha, kind="stable")
    thr = np.empty(m)
    thr[order] = tol / (m - np.arange(m))
    passed = alpha[order] < thr[order]
    k = m if passed.all() else int(np.argmin(passed))  # first sorted test that fails
    rej = np.zeros(m, dtype=bool)
    rej[order[:k]] = True
    return rej, thr


STATISTICS: dict[str, StatisticRow] = {
    Statistic.DIFFERENCE.value: StatisticRow(lambda c_cal, c_val: c_cal + c_val, chi2_p_value),
    Statistic.PAPER.value: StatisticRow(lambda c_cal, c_val: c_cal, chi2_p_value),
}

CORRECTIONS: dict[str, CorrectionRow] = {
    Correction.BONFERRONI.value: CorrectionRow(bonferroni),
    Correction.HOLM.value: CorrectionRow(holm),
}

R = TypeVar("R")


def _row(table: Mapping[str, R], name: object, what: str) -> R:
    row = table.get(str(name)) if isinstance(name, str) else None
    if row is None:
        raise InputError(f"{what} must be one of {list(table)}, got {name!r}")
    return row


def statistic_row(name: Statistic | str) -> StatisticRow:
    """The row of statistic ``name``; ``InputError`` for a name the table does not hold."""
    return _row(STATISTICS, name, "statistic")


def correction_row(name: Correction | str) -> CorrectionRow:
    """The row of correction ``name``; ``InputError`` for a name the table does not hold."""
    return _row(CORRECTIONS, name, "correction")

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from methods import InputError
from methods.press.design.sensors import branch_and_bound


def _blocks(rng, n_c: int, n_p: int) -> np.ndarray:
    """Random rank-1 or rank-2 PSD information per candidate."""
    out = []
    for _ in range(n_c):
        a = rng.normal(size=(int(rng.integers(1, 3)), n_p)) * rng.uniform(0.3, 3.0)
        out.append(a.T @ a)
    return np.array(out)


def _criterion(F: np.ndarray, chosen: tuple[int, ...], criterion: str) -> float:
    """The design criterion of the chosen sensors, from the definitions (methods/press/design/bnb.py):
    information M = sum of the chosen F_c, covariance C = M^-1; A = tr C, D = log det C,
    E = lambda_max(C) = 1 / lambda_min(M); inf when M is singular (no unique estimate)."""
    M = F[list(chosen)].sum(axis=0)
    if np.linalg.matrix_rank(M) < M.shape[0]:
        return np.inf
    C = np.linalg.inv(M)
    if criterion == "A":
        return float(np.trace(C))
    if criterion == "D":
        sign, logdet = np.linalg.slogdet(C)
        assert sign > 0
        return float(logdet)
    return float(np.max(np.linalg.eigvalsh(C)))


def _relative_gap(value: float, optimum: float, criterion: str) -> float:
    """The documented gap: (UB - LB)/UB for A and E, exp(UB - LB) - 1 for D."""
    return float(np.expm1(value - optimum) if criterion == "D" else (value - optimum) / value)


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_exhaustive_enumeration(criterion, seed) -> None:
    rng = np.random.default_rng(seed)
    F = _blocks(rng, 10, 3)
    values = {s: _criterion(F, s, criterion) for s in itertools.combinations(range(10), 4)}
    best = min(values, key=values.get)
    assert np.isfinite(values[best])
    res = branch_and_bound(F, 4, criterion, gap_tol=1e-3)
    assert len(res.selected) == 4 and res.selected == tuple(sorted(res.selected))
    # its value is the criterion of the design it chose
    assert res.value == pytest.approx(values[res.selected], rel=1e-9)
    # the proven bound is a true lower bound on the enumerated optimum
    assert res.proven and res.bound <= values[best] + 1e-9 * abs(values[best])
    # optimal up to the proven tolerance (ties of the criterion are possible)
    assert -1e-12 <= _relative_gap(res.value, values[best], criterion) <= res.gap + 1e-9
    assert _relative_gap(res.value, values[best], criterion) <= 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("criterion", ["A", "D", "E"])
def test_forty_candidates_choose_eight_within_one_percent(criterion) -> None:
    F = _blocks(np.random.default_rng(1), 40, 4)
    t0 = time.perf_counter()
    res = branch_and_bound(F, 8, criterion, gap_tol=0.01, time_limit=55.0)
    assert time.perf_counter() - t0 < 60.0
    assert res.proven and res.gap <= 0.01, res.summary()


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match="shape"):
        branch_and_bound(np.ones((3, 2)), 1)
    with pytest.raises(InputError, match="n_select"):
        branch_and_bound(np.ones((3, 2, 2)), 5)

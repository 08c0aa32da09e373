from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from methods import InputError
from methods.press.bnb import _Objective
from methods.press.design import branch_and_bound


def _blocks(rng, n_c: int, n_p: int) -> np.ndarray:
    """Random rank-1 or rank-2 PSD information per candidate."""
    out = []
    for _ in range(n_c):
        a = rng.normal(size=(int(rng.integers(1, 3)), n_p)) * rng.uniform(0.3, 3.0)
        out.append(a.T @ a)
    return np.array(out)


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_exhaustive_enumeration(criterion, seed) -> None:
    rng = np.random.default_rng(seed)
    F = _blocks(rng, 10, 3)
    obj = _Objective(F, np.zeros((3, 3)), criterion, 1.0)
    values = {
        s: obj.value(np.isin(np.arange(10), s).astype(float))
        for s in itertools.combinations(range(10), 4)
    }
    best = min(values, key=values.get)
    res = branch_and_bound(F, 4, criterion, gap_tol=1e-3)
    assert res.proven and res.bound <= values[best] + 1e-12
    # optimal up to the proven tolerance (ties of the criterion are possible)
    assert res.value == pytest.approx(values[best], rel=1e-3, abs=1e-9)
    assert res.value == pytest.approx(values[res.selected], rel=1e-12)


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

"""Budgets in the branch-and-bound sensor selection (issue 15), against exhaustive enumeration.

The oracle enumerates every subset that satisfies the budget and recomputes the criterion from
its definition (``test_bnb._criterion``), independently of the search's relaxations."""

from __future__ import annotations

import itertools
import json
import time

import numpy as np
import pytest

from methods import InputError
from methods.press.design.bnb import DesignResult
from methods.press.design.sensors import branch_and_bound
from tests.methods.press.test_bnb import _blocks, _criterion, _relative_gap


def _enumerate(F, criterion, costs=None, budget=None, sizes=None) -> dict[tuple[int, ...], float]:
    """Criterion of every subset of the given sizes (default: all) whose cost fits."""
    n_c = F.shape[0]
    sizes = range(1, n_c + 1) if sizes is None else sizes
    return {
        s: _criterion(F, s, criterion)
        for k in sizes
        for s in itertools.combinations(range(n_c), k)
        if costs is None or costs[list(s)].sum() <= budget
    }


def _check_against(res, values: dict, F, criterion: str, gap_tol: float) -> None:
    """Feasible choice, recomputed value, true lower bound, gap within tolerance."""
    best = min(values, key=values.get)
    assert np.isfinite(values[best])
    assert res.selected in values, f"{res.selected} violates the budget"
    assert res.selected == tuple(sorted(res.selected))
    assert res.value == pytest.approx(_criterion(F, res.selected, criterion), rel=1e-9)
    assert res.proven and res.gap <= gap_tol * (1 + 1e-9)
    assert res.bound <= values[best] + 1e-9 * abs(values[best])
    true_gap = _relative_gap(res.value, values[best], criterion)
    assert -1e-12 <= true_gap <= res.gap + 1e-9


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cost_budget_matches_enumeration(criterion, seed) -> None:
    rng = np.random.default_rng(seed)
    F = _blocks(rng, 10, 3)
    costs = rng.integers(1, 6, size=10).astype(float)
    budget = float(np.sort(costs)[:4].sum() + rng.integers(0, 4))
    values = _enumerate(F, criterion, costs, budget)
    res = branch_and_bound(F, None, criterion, costs=costs, budget=budget, gap_tol=1e-3)
    _check_against(res, values, F, criterion, 1e-3)
    assert res.total_cost == pytest.approx(costs[list(res.selected)].sum())
    assert res.total_cost <= budget and res.budget == budget
    assert res.n_select is None and not res.at_most


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
@pytest.mark.parametrize("at_most", [False, True])
@pytest.mark.parametrize("seed", [4, 5])
def test_count_and_cost_budget_match_enumeration(criterion, at_most, seed) -> None:
    rng = np.random.default_rng(seed)
    F = _blocks(rng, 10, 3)
    costs = rng.integers(1, 6, size=10).astype(float)
    budget = float(np.sort(costs)[:5].sum())
    sizes = range(1, 5) if at_most else [4]
    values = _enumerate(F, criterion, costs, budget, sizes)
    res = branch_and_bound(
        F, 4, criterion, costs=costs, budget=budget, at_most=at_most, gap_tol=1e-3
    )
    _check_against(res, values, F, criterion, 1e-3)
    assert res.n_select == 4 and res.at_most is at_most


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
@pytest.mark.parametrize("seed", [0, 6])
def test_at_most_n_equals_exactly_n_for_psd_blocks(criterion, seed) -> None:
    F = _blocks(np.random.default_rng(seed), 10, 3)
    values = _enumerate(F, criterion, sizes=range(1, 5))
    exact = {s: v for s, v in values.items() if len(s) == 4}
    # the oracle itself: with PSD blocks fewer than four sensors never beat four
    assert min(values.values()) == pytest.approx(min(exact.values()), rel=1e-12)
    at_most = branch_and_bound(F, 4, criterion, at_most=True, gap_tol=1e-4)
    unit = branch_and_bound(F, None, criterion, costs=np.ones(10), budget=4, gap_tol=1e-4)
    exactly = branch_and_bound(F, 4, criterion, gap_tol=1e-4)
    for res in (at_most, unit, exactly):
        _check_against(res, values, F, criterion, 1e-4)
        assert _relative_gap(res.value, min(exact.values()), criterion) <= 1e-4
    assert len(at_most.selected) <= 4 and at_most.at_most and at_most.budget is None
    assert unit.total_cost == len(unit.selected) and unit.budget == 4


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
def test_at_most_is_searched_as_a_budget_when_a_sensor_can_hurt(criterion) -> None:
    """Not PSD: three informative candidates and five that remove information. Exactly four
    must take a harmful one; at most four takes the three good ones."""
    rng = np.random.default_rng(7)
    good = [a.T @ a for a in rng.normal(size=(3, 3, 2))]
    F = np.array(good + [-0.05 * np.eye(2)] * 5)
    values = {  # only a positive definite information identifies the parameters
        s: _criterion(F, s, criterion) if np.linalg.eigvalsh(F[list(s)].sum(axis=0))[0] > 0
        else np.inf
        for k in range(1, 5)
        for s in itertools.combinations(range(8), k)
    }  # fmt: skip
    res = branch_and_bound(F, 4, criterion, at_most=True, gap_tol=1e-4)
    _check_against(res, values, F, criterion, 1e-4)
    assert res.selected == (0, 1, 2)
    exactly = branch_and_bound(F, 4, criterion, gap_tol=1e-4)
    assert len(exactly.selected) == 4 and exactly.value > res.value


def test_result_fields_and_json() -> None:
    F = _blocks(np.random.default_rng(8), 8, 2)
    costs = np.arange(1.0, 9.0)
    res = branch_and_bound(F, 3, "D", costs=costs, budget=9.0)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert list(d)[:8] == [
        "selected", "value", "bound", "gap", "proven", "n_nodes", "seconds", "criterion",
    ]  # fmt: skip
    assert d["total_cost"] == costs[list(res.selected)].sum() and d["budget"] == 9.0
    assert "cost" in res.summary() and "of 9" in res.summary()
    plain = branch_and_bound(F, 3, "D").to_dict()
    assert plain["total_cost"] is None and plain["budget"] is None and plain["n_select"] == 3
    legacy = DesignResult((0, 1), 1.0, 0.9, 0.1, False, 3, 0.1, "A")  # old positional form
    assert legacy.total_cost is None and not legacy.at_most


def test_infeasible_budgets_raise() -> None:
    F = _blocks(np.random.default_rng(9), 6, 2)
    costs = np.array([3.0, 4, 5, 6, 7, 8])
    with pytest.raises(InputError, match=r"budget 2 is below every candidate cost \(cheapest 3"):
        branch_and_bound(F, None, "A", costs=costs, budget=2.0)
    with pytest.raises(InputError, match=r"no subset .*exactly 2 sensors and total cost <= 6"):
        branch_and_bound(F, 2, "A", costs=costs, budget=6.0)
    # rank-1 blocks in 3 parameters, at most two affordable: nothing identifies
    rank1 = np.array([np.outer(v, v) for v in np.random.default_rng(1).normal(size=(6, 3))])
    for criterion in "ADE":
        with pytest.raises(InputError, match="identifies the 3 parameters"):
            branch_and_bound(rank1, None, criterion, costs=np.ones(6), budget=2.0)
    # the affordable candidates span two of three directions; the third costs too much
    flat = np.array([np.diag([1.0 + k, 2.0, 0.0]) for k in range(5)] + [np.eye(3)])
    with pytest.raises(InputError, match="identifies the 3 parameters"):
        branch_and_bound(flat, None, "D", costs=np.r_[np.ones(5), 10.0], budget=5.0)


def test_count_rule_alone_keeps_the_unidentifiable_result() -> None:
    """Without costs an unidentifiable count is reported as before (value inf, not proven):
    the CLI searches every size and skips those."""
    rank1 = np.array([np.outer(v, v) for v in np.random.default_rng(2).normal(size=(6, 3))])
    for kw in ({}, {"at_most": True}):
        res = branch_and_bound(rank1, 2, "D", **kw)
        assert res.value == np.inf and not res.proven and res.bound == np.inf


def test_invalid_arguments_are_named() -> None:
    F = _blocks(np.random.default_rng(10), 5, 2)
    for bad in ([1.0, -1, 1, 1, 1], [1.0, np.nan, 1, 1, 1], [1.0, 1, 1], [[1.0] * 5]):
        with pytest.raises(InputError, match="costs"):
            branch_and_bound(F, None, "A", costs=np.array(bad), budget=3.0)
    with pytest.raises(InputError, match="budget"):
        branch_and_bound(F, None, "A", costs=np.ones(5))
    for bad_budget in (-1.0, np.nan, np.inf):
        with pytest.raises(InputError, match="budget"):
            branch_and_bound(F, None, "A", costs=np.ones(5), budget=bad_budget)
    with pytest.raises(InputError, match="costs"):
        branch_and_bound(F, 2, "A", budget=3.0)
    with pytest.raises(InputError, match="n_select"):
        branch_and_bound(F, None, "A")
    with pytest.raises(InputError, match="n_select"):
        branch_and_bound(F, None, "A", at_most=True)
    for bad_n in (0, 2.5):
        with pytest.raises(InputError, match="n_select"):
            branch_and_bound(F, bad_n, "A", at_most=True)


def test_zero_cost_candidates_are_free() -> None:
    F = _blocks(np.random.default_rng(11), 8, 2)
    costs = np.array([0.0, 0, 3, 3, 3, 4, 4, 5])
    values = _enumerate(F, "A", costs, 6.0)
    res = branch_and_bound(F, None, "A", costs=costs, budget=6.0, gap_tol=1e-4)
    _check_against(res, values, F, "A", 1e-4)
    assert {0, 1} <= set(res.selected)


@pytest.mark.slow
@pytest.mark.parametrize("criterion", ["A", "D", "E"])
@pytest.mark.parametrize("budget", ["at_most", "cost"])
def test_sixty_candidates_within_one_percent(criterion, budget) -> None:
    """The CLI target: 60 candidates, 4 parameters, at most 10 (or a cost budget)."""
    rng = np.random.default_rng(2)
    F = _blocks(rng, 60, 4)
    kw: dict = {"at_most": True} if budget == "at_most" else {}
    if budget == "cost":
        kw = {"costs": rng.integers(1, 6, size=60).astype(float), "budget": 20.0}
    t0 = time.perf_counter()
    res = branch_and_bound(F, 10 if budget == "at_most" else None, criterion, gap_tol=0.01,
                           time_limit=55.0, **kw)  # fmt: skip
    assert time.perf_counter() - t0 < 60.0
    assert res.proven and res.gap <= 0.01, res.summary()


@pytest.mark.parametrize("seed", range(6))
def test_linear_minimum_of_the_frank_wolfe_bound_against_an_lp(seed) -> None:
    """The closed forms (fractional knapsack; dualised cost row) against HiGHS on the LP
    ``min g . s, 0 <= s <= 1`` under the node's rows: never above it (valid), and equal."""
    from scipy.optimize import linprog

    from methods.press.design.bnb_relax import linear_min

    rng = np.random.default_rng(seed)
    n = 12
    g = rng.normal(size=n)
    cost = rng.integers(0, 5, size=n).astype(float)
    count, budget = np.ones(n), np.sort(cost)[:4].sum() + 2  # exactly 4 remains feasible
    cases = [
        ([count], [4.0], [True]),
        ([count], [4.0], [False]),
        ([cost], [budget], [False]),
        ([count, cost], [4.0, budget], [True, False]),
        ([count, cost], [4.0, budget], [False, False]),
    ]
    for a, r, eq in cases:
        a, r, eq = np.array(a), np.array(r), np.array(eq)
        lp = linprog(g, A_ub=a[~eq] if (~eq).any() else None, b_ub=r[~eq] if (~eq).any() else None,
                     A_eq=a[eq] if eq.any() else None, b_eq=r[eq] if eq.any() else None,
                     bounds=[(0, 1)] * n, method="highs")  # fmt: skip
        assert lp.status == 0
        got = linear_min(g, a, r, eq)
        assert got <= lp.fun + 1e-9
        assert got == pytest.approx(lp.fun, abs=1e-7)

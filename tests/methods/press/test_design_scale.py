"""Sensor design beyond a handful of sensors (issue 15): candidate sheets, budgets (exactly n,
at most n, cost <= B), branch-and-bound with a proven gap where enumeration is too costly, and
second-order terms refitted per subset. Oracles: criteria recomputed from the per-sensor
information by plain linear algebra, exhaustive enumeration of small cases, and invariants."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import methods
from methods import InputError
from methods.press.design import search as design_search
from methods.press.design.sensors import sensor_blocks, sensor_design
from models.press import M3

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples" / "gauges"))
from gauges import Frame  # noqa: E402  (the shipped 60-probe example)

FRAME = Frame()
SIGMA = dict.fromkeys(FRAME.sensors, 0.5)
FIRST_16 = list(FRAME.sensors[:8]) + list(FRAME.sensors[45:53])  # columns and bearing


def _criterion(M: np.ndarray, subset, criterion: str) -> float:
    """First-order criterion of a subset from the definitions: C = (sum M_k)^-1."""
    info = M[list(subset)].sum(axis=0)
    ev = np.linalg.eigvalsh(info)
    if ev[0] <= 1e-10 * ev[-1]:
        return np.inf
    C = np.linalg.inv(info)
    return {"A": float(np.trace(C)), "D": float(np.linalg.slogdet(C)[1]),
            "E": float(np.linalg.eigvalsh(C)[-1])}[criterion]  # fmt: skip


def _blocks(candidates: list[str]) -> np.ndarray:
    M, _, _, _ = sensor_blocks(FRAME, None, sigma=SIGMA)
    return M[[FRAME.sensors.index(c) for c in candidates]]


@pytest.mark.parametrize("criterion", ["A", "D", "E"])
def test_branch_and_bound_finds_the_enumerated_optimum(criterion, monkeypatch) -> None:
    M = _blocks(FIRST_16)
    values = {s: _criterion(M, s, criterion) for s in itertools.combinations(range(16), 5)}
    optimum = min(values.values())
    exact = sensor_design(FRAME, None, n_sensors=5, criterion=criterion, sigma=SIGMA,
                          candidates=FIRST_16)  # fmt: skip
    assert exact.search["method"] == "enumeration" and exact.search["subsets"] == len(values)
    assert exact.best[criterion] == pytest.approx(optimum, rel=1e-9)
    monkeypatch.setattr(design_search, "ENUMERATION_LIMIT", 10)  # force the search
    monkeypatch.setattr("methods.press.design.sensors.ENUMERATION_LIMIT", 10)
    found = sensor_design(FRAME, None, n_sensors=5, criterion=criterion, sigma=SIGMA,
                          candidates=FIRST_16, gap_tol=1e-3)  # fmt: skip
    assert found.search["method"] == "branch-and-bound" and found.search["proven"]
    chosen = [FIRST_16.index(s) for s in found.best_sensors]
    value = _criterion(M, chosen, criterion)
    assert value == pytest.approx(found.best[criterion], rel=1e-9)
    gap = np.expm1(value - optimum) if criterion == "D" else (value - optimum) / value
    assert gap <= 1e-3 + 1e-12


def test_a_cost_budget_picks_the_best_affordable_subset() -> None:
    candidates = FIRST_16[:10]
    costs = {c: float(1 + (i % 3)) for i, c in enumerate(candidates)}  # 1, 2, 3, 1, ...
    M = _blocks(candidates)
    affordable = [s for k in range(1, 11) for s in itertools.combinations(range(10), k)
                  if sum(costs[candidates[i]] for i in s) <= 7.0]  # fmt: skip
    optimum = min(_criterion(M, s, "D") for s in affordable)
    d = sensor_design(FRAME, None, n_sensors=None, criterion="D", sigma=SIGMA, costs=costs,
                      budget=7.0, candidates=candidates)  # fmt: skip
    assert d.best["cost"] <= 7.0 and d.best["D"] == pytest.approx(optimum, rel=1e-9)
    assert set(d.table["cost"]) and d.table["cost"].max() <= 7.0  # only affordable subsets
    assert d.search["budget"] == "cost <= 7"


def test_at_most_n_equals_exactly_n_with_first_order_information() -> None:
    """Information adds up (PSD blocks), so more sensors never raise A, D or E."""
    at_most = sensor_design(FRAME, None, n_sensors=None, max_sensors=4, criterion="E",
                            sigma=SIGMA, candidates=FIRST_16)  # fmt: skip
    exactly = sensor_design(FRAME, None, n_sensors=4, criterion="E", sigma=SIGMA,
                            candidates=FIRST_16)  # fmt: skip
    assert at_most.best["n_sensors"] == 4
    assert at_most.best["E"] == pytest.approx(exactly.best["E"], rel=1e-12)
    best_per_size = at_most.table[at_most.table["identifiable"]].groupby("n_sensors")["E"].min()
    assert (np.diff(best_per_size.to_numpy()) <= 1e-12).all()


def test_refitted_second_order_terms_on_the_twin(twin_m3) -> None:
    """Refitting per subset: the all-sensor subset is judged at the all-sensor fit (the same
    numbers either way); a smaller subset at its own fit (different second-order terms)."""
    table, sheet = twin_m3
    table = methods.correct_to_setpoints(table)
    sigma = dict(zip(sheet.sensor, sheet.sigma_um))
    full = sensor_design(M3, table, n_sensors=None, sigma=sigma)
    refit = sensor_design(M3, table, n_sensors=None, sigma=sigma,
                          refit=True)  # fmt: skip
    a, b = full.table.set_index("code"), refit.table.set_index("code")
    assert b.loc["111", "E"] == pytest.approx(a.loc["111", "E"], rel=1e-6)
    assert b.loc["110", "E"] != pytest.approx(a.loc["110", "E"], rel=1e-9)
    assert refit.search["second_order"] == "refitted per subset"
    assert full.search["second_order"] == "at the all-sensor fit"


def test_budget_requests_that_cannot_work_are_refused() -> None:
    with pytest.raises(InputError, match="too many to try every number"):
        sensor_design(FRAME, None, n_sensors=None, sigma=SIGMA)
    with pytest.raises(InputError, match="cost budget needs a cost per sensor"):
        sensor_design(FRAME, None, n_sensors=None, sigma=SIGMA, budget=3.0, candidates=FIRST_16)
    with pytest.raises(InputError, match=r"not sensors of the model"):
        sensor_design(FRAME, None, n_sensors=2, sigma=SIGMA, candidates=["nope"])
    with pytest.raises(InputError, match="no sensor subset fits the budget"):
        sensor_design(FRAME, None, n_sensors=None, sigma=SIGMA, candidates=FIRST_16[:3],
                      costs=dict.fromkeys(FIRST_16[:3], 5.0), budget=1.0)  # fmt: skip


def test_refit_judges_a_subset_that_cannot_be_fitted_alone_as_not_identifiable(
    tmp_path: Path,
) -> None:
    """The worked example's stiffening spring: three parameters, and one probe alone cannot
    be fitted; refitting per subset must mark those subsets, not fail."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "examples" / "spring"))
    from make_table import main as make_table
    from spring import StiffeningSpring

    make_table(tmp_path)
    table = methods.correct_to_setpoints(pd.read_csv(tmp_path / "spring.csv"))
    sigma = {"tip": 0.05, "lever": 0.05}
    d = sensor_design(StiffeningSpring(), table, n_sensors=None, sigma=sigma, refit=True)
    rows = d.table.set_index("code")
    assert not rows.loc["10", "identifiable"] and not rows.loc["01", "identifiable"]
    assert bool(rows.loc["11", "identifiable"]) and d.best["code"] == "11"


def test_a_sheet_may_list_only_the_candidates() -> None:
    """Without data the other sensors' sigma is irrelevant (never chosen): a 10-row sheet
    designs among those 10."""
    ten = dict(list(SIGMA.items())[:10])
    d = sensor_design(FRAME, None, n_sensors=4, sigma=ten, candidates=list(ten))
    assert set(d.best_sensors) <= set(ten) and len(d.best_sensors) == 4


def test_one_count_rule_per_design() -> None:
    from pydantic import ValidationError

    from flows.press.settings import PressStudy

    with pytest.raises(InputError, match="give either exactly 5 sensors or at most 3"):
        sensor_design(FRAME, None, n_sensors=5, max_sensors=3, sigma=SIGMA, candidates=FIRST_16)
    assert PressStudy(max_sensors=10).n_sensors is None  # the default count gives way
    with pytest.raises(ValidationError, match="give one count rule"):
        PressStudy(max_sensors=10, n_sensors=3)

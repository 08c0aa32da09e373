"""The statistics and corrections of the press test are tables (methods/press/uncertainty/tables):
every name the CLI offers has a row, an unknown name is refused (never an ``else`` branch), and a
new row is picked up by the test without touching ``hypothesis``."""

from __future__ import annotations

import numpy as np
import pytest

from methods import InputError, correct_to_setpoints, make_splits, prepare, run_split_batch
from methods.press.uncertainty import tables
from methods.press.uncertainty.hypothesis import combine_tests, decisions, statistic_value
from methods.press.uncertainty.tables import Correction, Statistic
from models.press import M3, simulate_press


def test_the_enums_the_cli_offers_and_the_tables_list_the_same_names() -> None:
    assert sorted(s.value for s in Statistic) == sorted(tables.STATISTICS)
    assert sorted(c.value for c in Correction) == sorted(tables.CORRECTIONS)


def test_an_unknown_statistic_or_correction_is_refused() -> None:
    C = np.eye(2)
    with pytest.raises(InputError, match=r"statistic must be one of .*got 'trace'"):
        statistic_value(np.ones(2), C, C, "trace")
    with pytest.raises(InputError, match=r"correction must be one of .*got 'sidak'"):
        decisions(np.array([0.01, 0.5]), 0.05, "sidak")
    with pytest.raises(InputError, match="correction"):
        combine_tests(_rows([0.01, 0.5]), 0.05, "sidak")
    with pytest.raises(InputError, match="statistic"):
        statistic_value(np.ones(2), C, C, 3)  # type: ignore[arg-type]


def test_the_existing_rows_follow_their_definitions() -> None:
    # analytic: d = (1, 2), C_cal = diag(1, 4), C_val = diag(3, 4)
    d, c_cal, c_val = np.array([1.0, 2.0]), np.diag([1.0, 4.0]), np.diag([3.0, 4.0])
    assert statistic_value(d, c_cal, c_val, Statistic.DIFFERENCE) == pytest.approx(1 / 4 + 4 / 8)
    assert statistic_value(d, c_cal, c_val, "paper") == pytest.approx(1 / 1 + 4 / 4)
    # chi2 with 2 dof: survival exp(-T/2)
    p = tables.STATISTICS["difference"].p_value(3.0, 2)
    assert p == pytest.approx(np.exp(-1.5), rel=1e-12)


def _rows(alpha: list[float]):
    import pandas as pd

    return pd.DataFrame({"test": range(len(alpha)), "alpha_min": alpha, "ok": [True] * len(alpha)})


def test_a_new_correction_row_is_picked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # an unadjusted rule: every test at tol (not a family-wise rule; only to see it used)
    def unadjusted(alpha: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
        return alpha < tol, np.full(alpha.size, tol)

    monkeypatch.setitem(tables.CORRECTIONS, "none", tables.CorrectionRow(unadjusted))
    rej, thr = decisions(np.array([0.04, 0.2, np.nan]), 0.05, "none")
    assert rej.tolist() == [True, False, False] and thr.tolist() == [0.05] * 3
    det = combine_tests(_rows([0.04, 0.2, 0.6]), 0.05, "none")
    # Bonferroni would not reject 0.04 (threshold 0.05 / 3): the new row decided
    assert det.rejected and det.correction == "none" and det.n_rejections == 1


def test_a_new_statistic_row_is_picked_up_by_the_split_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # V = 4 (C_cal + C_val): T is a quarter of the difference statistic's, split by split
    row = tables.StatisticRow(lambda c_cal, c_val: 4.0 * (c_cal + c_val), tables.chi2_p_value)
    monkeypatch.setitem(tables.STATISTICS, "quarter", row)
    table = correct_to_setpoints(simulate_press("M3", seed=1)[0])
    prep = prepare(M3, table)
    splits = make_splits("random", prep.setpoints, prep.loading, prep.z.shape[0], 4, 0)
    base = run_split_batch(prep, splits)
    new = run_split_batch(prep, splits, statistic="quarter")
    assert base["ok"].all()
    # the same fits (rtol: identical arithmetic up to the factor 4 in one solve)
    np.testing.assert_allclose(new["T"], base["T"] / 4, rtol=1e-12)
    n_p = len(prep.names)
    expect = [tables.chi2_p_value(t, n_p) for t in new["T"]]
    np.testing.assert_allclose(new["alpha_min"], expect, rtol=1e-12)
    assert prepare(M3, table, statistic="quarter").statistic == "quarter"

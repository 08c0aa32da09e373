"""Failed split fits never decide a verdict; a non-converged full-data fit is refused."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from methods import InputError, combine_tests, make_splits, prepare, run_split_batch
from methods.press.uncertainty.detection import INCONCLUSIVE, PASSES, REJECTED
from methods.press.uncertainty.hypothesis import MAX_FAILED_FRACTION, FitNotConvergedError
from tests.methods.press.helpers import Decay, table_from


class FarStart(Decay):
    """Starts at the bound b = 1e3: exp(-1e3 t) underflows, LM cannot leave (no descent)."""

    parameters: ClassVar[dict] = {"a": 1.0, "b": 1e3}


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 3.0, 15)
    z = 2.0 * np.exp(-0.8 * t)[None, :, None] + 0.01 * rng.normal(size=(4, 15, 1))
    return table_from(z, t, ["y"])


def test_prepare_refuses_a_full_fit_that_did_not_converge() -> None:
    with pytest.raises(FitNotConvergedError, match="did not converge") as exc:
        prepare(FarStart(), _table(0), sigma={"y": 0.01})
    assert isinstance(exc.value, InputError)  # the CLI maps it to exit 2


def test_failed_split_fits_get_no_p_value_and_make_the_verdict_inconclusive() -> None:
    # issue 9's reproduction: every split fit starts from a bad point (b = 1e3, at its bound)
    prep = prepare(Decay(), _table(1), sigma={"y": 0.01})
    bad = dataclasses.replace(prep, start=np.array([1e3, 1e3]))
    splits = make_splits("random", prep.setpoints, prep.loading, 4, 20, 0)
    rows = run_split_batch(bad, splits)
    assert not rows["ok"].any() and rows["alpha_min"].isna().all() and rows["T"].isna().all()
    assert rows["failure"].str.contains("did not converge").all()
    det = combine_tests(rows, 0.05)
    # before: alpha 0 for runaway fits -> all 20 "reject" -> "model uncertainty detected"
    assert det.n_failed == 20 and det.n_rejections == 0
    assert det.inconclusive and not det.rejected and det.verdict == INCONCLUSIVE
    d = det.to_dict()
    assert d["verdict"] == INCONCLUSIVE and d["n_failed"] == 20 and d["rejected"] is False
    assert "inconclusive" in det.summary().lower()


def test_good_start_gives_a_valid_verdict_with_no_failures() -> None:
    prep = prepare(Decay(), _table(1), sigma={"y": 0.01})
    splits = make_splits("random", prep.setpoints, prep.loading, 4, 20, 0)
    det = combine_tests(run_split_batch(prep, splits), 0.05)
    assert det.n_failed == 0 and not det.inconclusive and det.verdict in (PASSES, REJECTED)
    assert det.tests["failure"].eq("").all()


def _rows(alpha: list[float], ok: list[bool]) -> pd.DataFrame:
    return pd.DataFrame({"test": range(len(alpha)), "alpha_min": alpha, "ok": ok})


def test_inconclusive_rule_is_more_than_ten_percent_failed() -> None:
    n = 20
    k = int(MAX_FAILED_FRACTION * n)  # 2 failures of 20: at the limit, still conclusive
    alpha = [0.5] * (n - k) + [np.nan] * k
    det = combine_tests(_rows(alpha, [True] * (n - k) + [False] * k), 0.05)
    assert det.verdict == PASSES and det.n_failed == k
    alpha = [0.5] * (n - k - 1) + [np.nan] * (k + 1)  # 3 of 20: more than 10 %
    det = combine_tests(_rows(alpha, [True] * (n - k - 1) + [False] * (k + 1)), 0.05)
    assert det.verdict == INCONCLUSIVE and det.n_failed == k + 1


def test_a_strong_rejection_with_too_many_failures_is_still_inconclusive() -> None:
    alpha = [1e-12] + [0.5] * 15 + [np.nan] * 4  # 4 of 20 failed
    det = combine_tests(_rows(alpha, [True] * 16 + [False] * 4), 0.05)
    assert det.n_rejections == 1 and det.verdict == INCONCLUSIVE and not det.rejected

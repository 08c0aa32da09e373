from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from methods import (
    InputError,
    combine_tests,
    correct_to_setpoints,
    detect_model_uncertainty,
    make_splits,
    prepare,
    run_split_batch,
)
from methods.press.uncertainty.hypothesis import decisions
from methods.press.uncertainty.tables import Correction
from models.press import M1, M2, M3, simulate_press

MODELS = {"M1": M1, "M2": M2, "M3": M3}


@pytest.mark.parametrize("truth", ["M1", "M2", "M3"])
def test_only_the_true_friction_model_passes(truth) -> None:
    table, _ = simulate_press(truth, seed=1)
    table = correct_to_setpoints(table)
    verdicts = {
        name: detect_model_uncertainty(m, table, n_tests=50).rejected for name, m in MODELS.items()
    }
    assert verdicts == {name: name != truth for name in MODELS}


@pytest.mark.slow
@pytest.mark.parametrize("truth", ["M1", "M2", "M3"])
def test_only_the_true_model_passes_over_seeds(truth) -> None:
    for seed in range(2, 8):
        table = correct_to_setpoints(simulate_press(truth, seed=seed)[0])
        verdicts = {
            n: detect_model_uncertainty(m, table, n_tests=50).rejected for n, m in MODELS.items()
        }
        assert verdicts == {n: n != truth for n in MODELS}, (seed, verdicts)


def test_holm_rejects_whenever_bonferroni_does() -> None:
    rng = np.random.default_rng(12)
    for _ in range(500):
        m = int(rng.integers(1, 40))
        alpha = rng.uniform(size=m) ** rng.uniform(1, 8)  # some small p-values
        bonf, _ = decisions(alpha, 0.05, Correction.BONFERRONI)
        holm, _ = decisions(alpha, 0.05, Correction.HOLM)
        assert np.all(holm[bonf]) and holm.sum() >= bonf.sum()


def test_holm_step_down_example() -> None:
    alpha = np.array([0.01, 0.04, 0.03, 0.005])
    rej, thr = decisions(alpha, 0.05, Correction.HOLM)
    # sorted 0.005 < .05/4, 0.01 < .05/3, 0.03 >= .05/2 -> stop
    assert rej.tolist() == [True, False, False, True]
    assert thr[3] == pytest.approx(0.0125)


def test_batches_combine_to_the_same_detection(twin_m3) -> None:
    table, _ = twin_m3
    full = detect_model_uncertainty(M2, table, n_tests=30, seed=5)
    prep = pickle.loads(pickle.dumps(prepare(M2, table)))  # as a process worker sees it
    splits = make_splits("random", prep.setpoints, prep.loading, 6, 30, seed=5)
    rows = [run_split_batch(prep, splits[i : i + 7]) for i in range(0, 30, 7)]
    det = combine_tests(rows[::-1], 0.05, "bonferroni", n_tests=30)
    np.testing.assert_allclose(det.alpha_min, full.alpha_min, rtol=1e-8)
    assert det.rejected == full.rejected and det.n_rejections == full.n_rejections


def test_paper_statistic_is_larger(twin_m3) -> None:
    table, _ = twin_m3
    d = detect_model_uncertainty(M3, table, n_tests=10, statistic="difference")
    p = detect_model_uncertainty(M3, table, n_tests=10, statistic="paper")
    # C_cal <= C_cal + C_val in the Loewner order, so T_paper >= T_difference
    assert np.all(p.tests["T"].to_numpy() >= d.tests["T"].to_numpy())


def test_series_splits_cannot_see_hysteresis(twin_m3) -> None:
    table, _ = twin_m3
    det = detect_model_uncertainty(M1, table, n_tests=20, split="series")
    # every series repeats the same hysteresis: both halves share the same model error
    assert not det.rejected


@pytest.mark.parametrize("split", ["magnitude", "phase"])
def test_deterministic_splits_reject_the_frictionless_model(twin_m3, split) -> None:
    table, _ = twin_m3
    assert detect_model_uncertainty(M1, table, n_tests=50, split=split).rejected
    det = detect_model_uncertainty(M3, table, n_tests=50, split=split)
    assert not det.rejected and det.n_tests < 50 and det.warnings


def test_result_and_progress(twin_m3) -> None:
    table, _ = twin_m3
    calls = []
    det = detect_model_uncertainty(
        M3, table, n_tests=30, correction="holm", progress=lambda d, t: calls.append((d, t))
    )
    assert calls[-1] == (30, 30) and det.alpha_min.shape == (30,)
    assert {"test", "cal", "val", "p_cal_k5", "p_val_k7", "T", "alpha_min", "rejected"} <= set(
        det.tests.columns
    )
    json.dumps(det.to_dict())
    assert "M3" in det.summary()


def test_bad_options(twin_m3) -> None:
    table, _ = twin_m3
    with pytest.raises(InputError, match="statistic"):
        detect_model_uncertainty(M3, table, n_tests=5, statistic="t")
    with pytest.raises(InputError, match="correction"):
        detect_model_uncertainty(M3, table, n_tests=5, correction="fdr")
    with pytest.raises(InputError, match="tol"):
        detect_model_uncertainty(M3, table, n_tests=5, tol=0.0)

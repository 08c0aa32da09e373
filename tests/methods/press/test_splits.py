from __future__ import annotations

import numpy as np
import pytest

from methods import InputError, make_splits
from models.press import DEFAULT_SETPOINTS_N

Q = DEFAULT_SETPOINTS_N
LOADING = np.arange(Q.size) <= int(np.argmax(Q))


def test_random_splits_partition_steps_and_are_seeded() -> None:
    s = make_splits("random", Q, LOADING, 6, 40, seed=3, fraction=0.5)
    assert len(s) == 40 and len({sp.cal for sp in s}) == 40
    for sp in s:
        assert sp.axis == "step" and len(sp.cal) == 14
        assert sorted(sp.cal + sp.val) == list(range(Q.size))
    assert s == make_splits("random", Q, LOADING, 6, 40, seed=3, fraction=0.5)
    assert s != make_splits("random", Q, LOADING, 6, 40, seed=4, fraction=0.5)


def test_series_splits_are_capped_at_distinct_subsets() -> None:
    s = make_splits("series", Q, LOADING, 6, 100, seed=0)
    assert len(s) == 20  # C(6, 3)
    assert all(sp.axis == "series" and len(sp.cal) == 3 for sp in s)


def test_magnitude_splits_separate_low_from_high_forces() -> None:
    s = make_splits("magnitude", Q, LOADING, 6, 50, seed=0)
    assert 1 <= len(s) < 50
    for sp in s:
        assert Q[list(sp.cal)].max() < Q[list(sp.val)].min()
        assert 0.25 <= len(sp.cal) / Q.size <= 0.75


def test_phase_split_is_loading_vs_unloading() -> None:
    (sp,) = make_splits("phase", Q, LOADING, 6, 50)
    assert sp.cal == tuple(range(15)) and sp.val == tuple(range(15, 29))


def test_bad_split_options() -> None:
    with pytest.raises(InputError, match="split must be one of"):
        make_splits("diagonal", Q, LOADING, 6, 5)
    with pytest.raises(InputError, match="n_tests"):
        make_splits("random", Q, LOADING, 6, 0)
    with pytest.raises(InputError, match="calibration_fraction"):
        make_splits("random", Q, LOADING, 6, 5, fraction=1.0)

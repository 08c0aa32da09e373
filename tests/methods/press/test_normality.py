from __future__ import annotations

import numpy as np
import pytest

from methods import InputError, check_normality
from tests.methods.press.helpers import table_from


def _table(noise: np.ndarray):
    n_q = noise.shape[1]
    return table_from(noise[:, :, None], np.linspace(1.0, 2.0, n_q), ["s"])


def test_gaussian_errors_pass_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(7)
    n = 200
    rejections = sum(
        not check_normality(_table(rng.normal(size=(6, 29)))).all_normal for _ in range(n)
    )
    # expected 5 %; binomial sd sqrt(.05 * .95 / 200) = 1.5 %: allow 0 .. 5 % + 3.5 sd
    assert rejections / n <= 0.05 + 3.5 * np.sqrt(0.05 * 0.95 / n)


@pytest.mark.parametrize(
    "draw",
    [lambda r, s: r.uniform(size=s), lambda r, s: r.standard_t(2, size=s)],
    ids=["uniform", "student-t2"],
)
def test_non_gaussian_errors_fail_with_enough_samples(draw) -> None:
    rng = np.random.default_rng(8)
    report = check_normality(_table(draw(rng, (6, 300))))  # 1800 deviations
    assert not report.all_normal and report.table["p_value"].iloc[0] < 1e-3
    assert report.to_dict()["sensors"][0]["n"] == 1800


def test_needs_three_series() -> None:
    rng = np.random.default_rng(9)
    with pytest.raises(InputError, match="at least 3 measurement series"):
        check_normality(_table(rng.normal(size=(2, 29))))

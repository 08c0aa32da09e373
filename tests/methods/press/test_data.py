from __future__ import annotations

import numpy as np
import pytest

from methods import InputError, correct_to_setpoints
from methods.press.data import sigma_from_repeats, to_cube
from tests.methods.press.helpers import table_from


def test_correction_is_exact_on_linear_branches() -> None:
    rng = np.random.default_rng(11)
    setpoints = np.r_[np.linspace(10e3, 150e3, 15), np.linspace(140e3, 10e3, 14)]
    n_m = 4
    forces = setpoints + rng.normal(scale=300.0, size=(n_m, setpoints.size))
    loading = np.arange(setpoints.size) <= 14
    # each series, branch and sensor its own straight line z = a + b q
    a = rng.normal(size=(n_m, 2, 2))
    b = rng.normal(size=(n_m, 2, 2)) * 1e-3
    br = np.where(loading, 0, 1)
    z = a[:, br, :] + b[:, br, :] * forces[:, :, None]
    out = correct_to_setpoints(table_from(z, forces, ["s1", "s2"], setpoints))
    expect = a[:, br, :] + b[:, br, :] * setpoints[None, :, None]
    cube = to_cube(out, ["s1", "s2"])
    # exact up to rounding (values O(1), forces O(1e5) -> 1e-9 is ample)
    np.testing.assert_allclose(cube.z, expect, atol=1e-9)
    np.testing.assert_array_equal(out["force_N"], out["force_setpoint_N"])


def test_correction_extrapolates_linearly_at_the_ends() -> None:
    setpoints = np.array([1.0, 2.0, 3.0, 2.0, 1.0])
    forces = np.array([[1.1, 2.1, 2.9, 2.05, 1.2]])
    z = (3.0 * forces + 1.0)[:, :, None]
    out = to_cube(correct_to_setpoints(table_from(z, forces, ["s"], setpoints)))
    np.testing.assert_allclose(out.z[0, :, 0], 3.0 * setpoints + 1.0, atol=1e-12)


def test_sigma_from_repeats_is_unbiased_pooled_std() -> None:
    rng = np.random.default_rng(5)
    z = rng.normal(size=(6, 400, 2)) * np.array([0.5, 2.0]) + rng.normal(size=(1, 400, 2))
    s = sigma_from_repeats(z)
    # 400 * 5 = 2000 dof: relative sd of s is ~1/sqrt(4000) = 1.6 %; 6 % is > 3 sd
    np.testing.assert_allclose(s, [0.5, 2.0], rtol=0.06)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.drop(columns="force_N"), "lacks column"),
        (lambda t: t.iloc[:0], "empty"),
        (lambda t: t.iloc[1:], "exactly one row"),
    ],
)
def test_bad_tables_raise_input_error(mutate, message) -> None:
    z = np.ones((2, 3, 1))
    table = table_from(z, np.array([1.0, 2.0, 1.0]), ["s"])
    with pytest.raises(InputError, match=message):
        correct_to_setpoints(mutate(table))


def test_sigma_needs_two_series() -> None:
    with pytest.raises(InputError, match="at least 2 series"):
        sigma_from_repeats(np.ones((1, 3, 1)))


@pytest.mark.parametrize("dtype", ["str", object, "category"])
def test_the_pivot_does_not_depend_on_row_order_sensor_dtype_or_extra_sensors(dtype) -> None:
    # oracle: the cube built element by element from the rows
    rng = np.random.default_rng(3)
    z = rng.normal(size=(3, 4, 3))
    table = table_from(z, np.tile([1.0, 2.0, 3.0, 2.0], (3, 1)), ["a", "b", "c"])
    table = table.sample(frac=1.0, random_state=2).assign(
        sensor=lambda t: t["sensor"].astype(dtype)
    )
    for sensors in (None, ["c", "a"], ["b"]):
        cube = to_cube(table, sensors)
        names = list(cube.sensors)
        assert names == (["a", "b", "c"] if sensors is None else sensors)
        assert all(type(s) is str for s in cube.sensors)
        expect = np.full(cube.z.shape, np.nan)
        for row in table.itertuples():
            if str(row.sensor) in names:
                i, j = list(cube.series).index(row.series), list(cube.steps).index(row.step)
                expect[i, j, names.index(str(row.sensor))] = row.displacement_um
        np.testing.assert_array_equal(cube.z, expect)


def test_a_repeated_cell_or_column_is_refused() -> None:
    z = np.ones((2, 3, 1))
    table = table_from(z, np.array([1.0, 2.0, 1.0]), ["s"])
    repeated = table.copy()
    repeated.loc[1, "step"] = repeated.loc[0, "step"]  # same size, one cell twice, one missing
    with pytest.raises(InputError, match="exactly one row"):
        to_cube(repeated)
    with pytest.raises(ValueError):  # two force_N columns: not a press table
        to_cube(table.assign(extra=1.0).rename(columns={"extra": "force_N"}))

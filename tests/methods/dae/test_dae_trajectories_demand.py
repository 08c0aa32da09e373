"""Trajectories (analytic derivatives, smoothness) and the demand format."""

from __future__ import annotations

import math

import numpy as np
import pytest

from methods.dae.demand import parse_demand
from methods.dae.trajectories import SmoothStep, VelocityStep, smooth_step_coefficients
from methods.errors import InputError


def test_degree9_coefficients_match_the_paper():
    c = smooth_step_coefficients(9)
    np.testing.assert_allclose(c, [0, 0, 0, 0, 0, 126, -420, 540, -315, 70])


@pytest.mark.parametrize("degree", [5, 7, 9, 11, 13])
def test_step_is_rest_to_rest_with_r_vanishing_derivatives(degree):
    st = SmoothStep(1.0, 3.0, 0.5, 2.5, degree)
    r = (degree - 1) // 2
    d = st.derivatives(np.array([0.5, 2.5]), r)
    np.testing.assert_allclose(d[0], [1.0, 3.0])
    # derivatives 1..r vanish at both ends (scale ~ 2/2^j, so 1e-9 absolute is tight)
    assert np.max(np.abs(d[1:])) < 1e-9
    assert st.continuity() == (r, 0.5)


def test_analytic_derivatives_match_finite_differences():
    rng = np.random.default_rng(1)
    st = SmoothStep(0.0, 2.0, 1.0, 4.0, 11)
    t = rng.uniform(1.1, 3.9, 20)
    h = 1e-5
    d = st.derivatives(t, 5)
    for j in range(5):
        fd = (st.derivatives(t + h, j)[j] - st.derivatives(t - h, j)[j]) / (2 * h)
        # central differences: error ~ h^2 * d^(j+3) ~ 1e-10 * O(100)
        np.testing.assert_allclose(fd, d[j + 1], atol=1e-6 * max(1, np.abs(d[j + 1]).max()))


def test_velocity_step_has_the_demanded_speeds():
    vs = VelocityStep(0.5, 0.75, 10.0, 30.0)
    d = vs.derivatives(np.array([0.0, 5.0, 40.0]), 1)
    np.testing.assert_allclose(d[1], [0.5, 0.5, 0.75])
    # position after the step: 0.5*40 + 0.25*(40-30) + mean of the velocity step over 20 s
    assert d[0, 2] == pytest.approx(0.5 * 40 + 0.25 * 10 + 0.25 * 20 * 0.5)


def test_demand_parsing_all_kinds():
    spec = {
        "t_end": 10,
        "outputs": {
            "a": {"type": "step", "start": 0, "end": 1, "t0": 1, "t1": 3, "degree": 11},
            "b": {"type": "steps", "start": 0, "moves": [{"to": 1, "t0": 1, "t1": 2}, {"to": -1, "t0": 4, "t1": 6}]},
            "c": {"type": "piecewise", "pieces": [{"from": 0, "type": "constant", "value": 0},
                                                  {"from": 2, "type": "polynomial", "coefficients": [0, 0, 0, 0, 0, 1], "t_ref": 2}]},
        },
        "paths": [{"axes": ["x", "y"], "waypoints": [[0, 0], [1, 2], [3, 2]], "times": [1, 5], "durations": [3, 3]}],
    }  # fmt: skip
    dem = parse_demand(spec, ["a", "b", "c", "x", "y"])
    g = dem.evaluate(["b", "x", "y"], np.array([0.0, 2.5, 5.0, 9.0]), 0)[0]
    np.testing.assert_allclose(g[0], [0, 1, 0, -1])
    np.testing.assert_allclose(g[1], [0, 0.5, 1, 3])
    np.testing.assert_allclose(g[2], [0, 1, 2, 2])
    cont = dem.continuity()
    assert cont["a"][0] == 5 and cont["x"][0] == 4
    assert cont["c"] == (4, 2.0)  # (t-2)^5 joins a constant: derivative 5 jumps at t = 2
    assert dem.t_end == 10 and math.isclose(dem.last_event(), 8.0)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"outputs": {"x": {"type": "step", "start": 0, "end": 1, "t0": 1, "t1": 3, "degree": 8}}}, "outputs.x.degree"),
        ({"outputs": {"x": {"type": "step", "start": 0, "end": 1, "t0": 3, "t1": 1}}}, "need t1 > t0"),
        ({"outputs": {"x": {"type": "wiggle"}}}, "outputs.x.type"),
        ({"outputs": {"x": {"type": "constant"}}}, "missing key 'value'"),
        ({"outputs": {"x": {"type": "constant", "value": "a"}}}, "outputs.x.value"),
        ({"outputs": {"y": {"type": "constant", "value": 1}}}, "missing ['x']"),
        ({"outputz": {}}, "unknown keys"),
    ],
)  # fmt: skip
def test_demand_errors_name_the_key(spec, fragment):
    with pytest.raises(InputError, match=None) as info:
        parse_demand(spec, ["x"])
    assert fragment in str(info.value)

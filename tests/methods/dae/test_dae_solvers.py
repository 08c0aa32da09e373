"""Inverse solvers against exact flat solutions; convergence orders; errors with times."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from methods.dae import (
    DemandSmoothnessWarning,
    InverseProblemError,
    ServoProblem,
    solve_inverse,
)
from methods.dae.demand import Demand
from methods.dae.trajectories import SmoothStep
from methods.errors import InputError
from models.underactuated import exact_solution, get_system


def _ctrl_error(system, demand, method, dt):
    r = solve_inverse(system.problem, demand, method=method, dt=dt, jit=False)
    ex = exact_solution(system, demand, r.table["t_s"].to_numpy())
    return r, {c: float(np.max(np.abs(ex[c] - r.table[c]))) for c in ex.columns if c != "t_s"}


@pytest.fixture(scope="module")
def two_mass():
    return get_system("two_mass")


def test_two_mass_matches_exact_flat_solution(two_mass):
    r, err = _ctrl_error(two_mass, two_mass.demand(), "euler", 1e-3)
    assert r.max_constraint_violation <= 1e-8
    # positions are algebraic in the index-3 form: exact to Newton tolerance
    assert err["x1"] < 1e-10 and err["x2"] < 1e-10
    # Euler: O(h) in velocities/controls; |F| ~ 2, so 5e-3 at h = 1e-3 is ~0.3 %
    assert err["F"] < 5e-3 and err["v_x1"] < 1e-3
    assert r.rank_info.ok and r.rank_info.p == 0


@pytest.mark.parametrize(
    ("method", "lo", "hi"), [("euler", 0.8, 1.2), ("bdf2", 1.8, 2.2), ("radau", 1.7, 2.3)]
)
def test_convergence_order_of_the_controls(two_mass, method, lo, hi):
    # degree 13 (C^6) so that the local errors at the ends of the step are not order-limiting
    dem = Demand({"x2": SmoothStep(0.0, 1.0, 0.5, 2.5, 13)}, t_end=3.0)
    e = [_ctrl_error(two_mass, dem, method, dt)[1]["F"] for dt in (4e-3, 2e-3)]
    order = np.log2(e[0] / e[1])
    assert lo <= order <= hi, f"{method}: order {order:.2f}"


def test_chain_of_three_matches_exact_solution():
    s = get_system("chain", {"N": 3})
    r, err = _ctrl_error(s, s.demand(), "bdf2", 1e-3)
    assert not r.rank_info.ok and r.rank_info.rank_CB == 2  # outside the paper's class: reported
    assert r.max_constraint_violation <= 1e-8
    # BDF2 at h = 1e-3: O(h^2) ~ 1e-6 times derivative scales ~ 10..100
    assert err["x1"] < 1e-5 and err["F"] < 1e-3


def test_planar_crane_matches_flat_solution_of_methods():
    s = get_system("planar_crane")
    r, err = _ctrl_error(s, s.demand(), "bdf2", 2e-3)
    assert r.max_constraint_violation <= 1e-8
    assert max(err["s"], err["l"], err["theta"]) < 1e-9  # algebraic: exact
    # BDF2, h = 2e-3; the degree-9 demand's jumps in gamma^(5) at the step ends keep the
    # local error there O(h): F ~ 20 N, M_w ~ 2.5 N m, so these are ~0.25 % / 0.1 %
    assert err["F"] < 5e-2 and err["M_w"] < 3e-3
    assert r.rank_info.p == 1 == r.rank_info.p_expected


def test_too_rough_demand_raises_with_time(two_mass):
    dem = Demand({"x2": SmoothStep(0.0, 1.0, 0.7, 2.5, 5)}, t_end=3.0)
    with pytest.raises(InverseProblemError, match=r"too rough at t = 0.7 s") as info:
        solve_inverse(two_mass.problem, dem, dt=1e-3)
    assert info.value.time == pytest.approx(0.7)
    assert isinstance(info.value, InputError)


def test_degree7_demand_warns(two_mass):
    dem = Demand({"x2": SmoothStep(0.0, 1.0, 0.5, 2.5, 7)}, t_end=3.0)
    with pytest.warns(DemandSmoothnessWarning, match="C\\^3"):
        r = solve_inverse(two_mass.problem, dem, dt=2e-3)
    assert r.warnings


def test_infeasible_crane_demand_names_the_time():
    # load lifted above the trolley: the rope length would have to become negative
    s = get_system("planar_crane")
    spec = {
        "t_end": 4.0,
        "outputs": {
            "x": {"type": "constant", "value": 0.0},
            "z": {"type": "step", "start": -2.0, "end": 1.0, "t0": 0.5, "t1": 3.5},
        },
    }
    with pytest.raises(InverseProblemError, match=r"at t = \d") as info:
        solve_inverse(s.problem, spec, dt=2e-3)
    assert 0.5 < info.value.time < 3.5


def _cubic_output_problem():
    # mass on a spring, output y = x^3 - x: dPhi/dx = 3x^2 - 1 vanishes at x = 1/sqrt(3)
    pb = ServoProblem("singular")
    x = pb.coordinates(["x", "z"], nominal=[0.0, 0.0])
    pb.controls(["F"])
    pb.set_dynamics(
        M=ca.DM.eye(2), f=ca.vertcat(-(x[0] - x[1]), -(x[1] - x[0])), G=ca.DM([[0], [1]])
    )
    pb.set_outputs(x[0] ** 3 - x[0], ["y"])
    return pb.setup()


def test_singular_partition_raises_with_time():
    pb = _cubic_output_problem()
    # y from 0 to -0.5 passes the turning point y(1/sqrt 3) = -0.385 going from x=0 upwards
    dem = Demand({"y": SmoothStep(0.0, -0.5, 0.5, 2.5, 9)}, t_end=3.0)
    with pytest.raises(InverseProblemError, match=r"(singular partition|Newton).*t = ") as info:
        solve_inverse(pb, dem, dt=1e-3)
    assert 0.5 < info.value.time < 2.5


def test_rank_condition_failure_is_an_input_error():
    pb = ServoProblem("bad")
    x = pb.coordinates(["a", "b"])
    pb.controls(["F"])
    pb.set_dynamics(M=ca.DM.eye(2), f=ca.vertcat(-x[0], -x[1]), G=ca.DM([[1], [0]]))
    pb.set_outputs(x[0], ["a"])  # output and input on the same, decoupled mass
    with pytest.raises(InverseProblemError, match="rank condition fails"):
        pb.setup()


def test_newton_failure_names_the_time(two_mass, monkeypatch):
    import methods.dae.inverse as inv

    def never(*args, **kwargs):
        return None, 30, 1.0

    monkeypatch.setattr(inv, "newton_step", never)
    dem = Demand({"x2": SmoothStep(0.0, 1.0, 0.5, 2.5, 9)}, t_end=3.0)
    # a tolerance no step can meet forces the fallback, which is made to fail
    with pytest.raises(InverseProblemError, match=r"Newton iteration failed at t = 0.5\d* s"):
        solve_inverse(two_mass.problem, dem, dt=1e-3, tol=1e-300)


def test_result_to_dict_is_plain_json(two_mass):
    import json

    r = solve_inverse(two_mass.problem, two_mass.default_demand, method="radau", dt=5e-3)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["method"] == "radau" and d["rank_info"]["ok"]
    assert list(r.table.columns) == ["t_s", "x1", "x2", "v_x1", "v_x2", "F"]
    assert "two_mass" in r.summary()


def test_bad_options_are_input_errors(two_mass):
    with pytest.raises(InputError, match="method must be one of"):
        solve_inverse(two_mass.problem, two_mass.default_demand, method="rk4")
    with pytest.raises(InputError, match="dt must be"):
        solve_inverse(two_mass.problem, two_mass.default_demand, dt=-1)


def test_plot_result_writes_a_figure(two_mass, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from methods.dae.plots import plot_result

    r = solve_inverse(two_mass.problem, two_mass.default_demand, dt=1e-2)
    plot_result(r, path=tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 1000

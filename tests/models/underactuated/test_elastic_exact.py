"""One-link elastic joint against its exact flat solution (link angle q1 demanded)."""

from __future__ import annotations

import numpy as np
import pytest

from methods.dae import solve_inverse
from models.underactuated import exact_solution, get_system


@pytest.fixture(scope="module")
def arm():
    return get_system("elastic_joint_1")


def _errors(system, method, dt):
    r = solve_inverse(system.problem, system.demand(), method=method, dt=dt, jit=False)
    ex = exact_solution(system, system.demand(), r.table["t_s"].to_numpy())
    return r, {c: float(np.max(np.abs(ex[c] - r.table[c]))) for c in ex.columns if c != "t_s"}


def test_exact_solution_satisfies_the_equations_of_motion(arm):
    # the exact solution fed to the model's right-hand side reproduces its own accelerations
    # (central differences of the exact velocities, O(dt^2): measured 3.9e-5 rad/s^2 against
    # accelerations up to 1.8 rad/s^2 at dt = 1e-3)
    dem = arm.demand()
    t = np.linspace(0.0, 4.0, 4001)
    ex = exact_solution(arm, dem, t)
    dt = t[1] - t[0]
    pb = arm.problem
    for i in range(1, len(t) - 1, 97):
        q = ex[["q1", "theta1"]].iloc[i].to_numpy()
        v = ex[["v_q1", "v_theta1"]].iloc[i].to_numpy()
        acc = (ex[["v_q1", "v_theta1"]].iloc[i + 1] - ex[["v_q1", "v_theta1"]].iloc[i - 1]) / (
            2 * dt
        )
        qdot, vdot = (np.asarray(x).ravel() for x in pb.fun_ode(q, v, [ex["tau1"].iloc[i]]))
        assert np.allclose(qdot, v, atol=1e-12)
        assert np.allclose(vdot, acc.to_numpy(), atol=1e-4)


def test_one_link_matches_exact_flat_solution(arm):
    r, err = _errors(arm, "euler", 1e-3)
    assert r.max_constraint_violation <= 1e-8
    assert r.rank_info.ok and r.rank_info.p == 0 == r.rank_info.p_expected
    # positions are algebraic in the index-3 form (theta1 from the projected equation b = 0)
    assert err["q1"] < 1e-10 and err["theta1"] < 1e-10
    # Euler, h = 1e-3: measured tau1 3.1e-4 N m (|tau1| <= 2.3 N m, ~0.01 %), v 9e-4 rad/s
    assert err["tau1"] < 1e-3 and err["v_theta1"] < 2e-3


@pytest.mark.parametrize(
    ("method", "comp", "lo", "hi"),
    [("euler", "tau1", 0.9, 1.1), ("bdf2", "v_theta1", 1.8, 2.2), ("radau", "tau1", 1.7, 2.3)],
)
def test_convergence_orders_against_exact_solution(arm, method, comp, lo, hi):
    # measured: Euler tau1 1.00; BDF2 velocities 2.00 (its tau1 is ~1 here: the degree-9 step's
    # jumps in q^(5) at the step ends limit the local error of the controls); Radau tau1 2.0
    e = [_errors(arm, method, dt)[1][comp] for dt in (4e-3, 2e-3)]
    order = np.log2(e[0] / e[1])
    assert lo <= order <= hi, f"{method} {comp}: order {order:.2f}"

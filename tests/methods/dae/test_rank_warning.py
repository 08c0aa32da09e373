"""The rank check ``p = rank(C M^-1 B^T)`` against its expected value ``2m - n`` (docs/methods.md
section 3.2) warns when they differ; it stays silent when they agree.

Oracle: for the two tiny problems below ``C M^-1 B^T`` is computed by hand (M = I), so the
expected ``p`` and ``2m - n`` are known without the implementation's rank routine.
"""

from __future__ import annotations

import warnings

import casadi as ca
import pytest

from methods.dae import ServoProblem, solve_inverse
from methods.dae.demand import Demand
from methods.dae.trajectories import SmoothStep
from models.underactuated import get_system


def _two_masses(actuation: list[float], output: int) -> ServoProblem:
    """Two unit masses joined by a spring (k = 1), force ``G u``, output ``x<output>``."""
    pb = ServoProblem("two_unit_masses")
    x = pb.coordinates(["x1", "x2"], nominal=[0.0, 0.0])
    pb.controls(["F"])
    spring = x[0] - x[1]
    pb.set_dynamics(M=ca.SX.eye(2), f=ca.vertcat(-spring, spring), G=ca.DM(actuation))
    pb.set_outputs(x[output - 1], ["y"])
    return pb.setup()


def _demand() -> Demand:
    return Demand({"y": SmoothStep(0.0, 0.5, 0.2, 1.2, 9)}, t_end=1.5)


def test_p_different_from_2m_minus_n_warns():
    # C = [1 0], B = -G^T = [-1 -1], M = I: C M^-1 B^T = -1, so p = 1 while 2m - n = 0;
    # rank([C; B]) = 2 = n, so the strict rank check passes and only p is off
    pb = _two_masses([1.0, 1.0], output=1)
    assert (pb.rank_info.rank_CB, pb.rank_info.p, pb.rank_info.p_expected) == (2, 1, 0)
    with pytest.warns(RuntimeWarning, match=r"differs from 2m - n"):
        r = solve_inverse(pb, _demand(), dt=1e-2, jit=False)
    assert any("2m - n" in w and "p = rank(C M^-1 B^T) = 1" in w for w in r.warnings)


def test_rank_deficient_chain_warns():
    # chain of 3 masses, one force, one output: n = 3 > 2m = 2, so rank([C; B]) <= 2 < n
    # (reported, outside the method's class) and 2m - n = -1 cannot equal any rank p >= 0
    s = get_system("chain", {"N": 3})
    with pytest.warns(RuntimeWarning, match=r"differs from 2m - n"):
        r = solve_inverse(s.problem, s.demand(), method="bdf2", dt=1e-2, jit=False)
    assert r.rank_info.p_expected == -1
    assert any("2m - n = -1" in w for w in r.warnings)


def test_p_equal_to_2m_minus_n_is_silent():
    # C = [0 1], B = [-1 0], M = I: C M^-1 B^T = 0, so p = 0 = 2m - n (the two-mass system)
    pb = _two_masses([1.0, 0.0], output=2)
    assert (pb.rank_info.rank_CB, pb.rank_info.p, pb.rank_info.p_expected) == (2, 0, 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = solve_inverse(pb, _demand(), dt=1e-2, jit=False)
    assert not [w for w in caught if "2m - n" in str(w.message)]
    assert not any("2m - n" in w for w in r.warnings)

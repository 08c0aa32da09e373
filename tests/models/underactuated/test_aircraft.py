"""Aircraft in prescribed trajectory flight: rank conditions, default demand, trim, Euler order."""

from __future__ import annotations

import numpy as np
import pytest

from methods.dae import forward_check, solve_inverse
from models.underactuated import get_system
from models.underactuated.aircraft import aero_coefficients, level_flight_trim

CONTROLS = ["delta_a", "delta_e", "delta_r", "T"]


@pytest.fixture(scope="module")
def aircraft():
    return get_system("aircraft")


def test_setup_passes_the_rank_conditions(aircraft):
    info = aircraft.problem.rank_info
    # n = 6, m = 4: rank([C; B]) = 6 and p = rank(C M^-1 B^T) = 2m - n = 2
    assert (info.n, info.m) == (6, 4)
    assert info.rank_CB == 6 and info.ok
    assert info.p == 2 == info.p_expected
    # and along a banked, sideslipping, rotating state (not only at the trimmed nominal one)
    q = np.array([10.0, -5.0, -300.0, 0.3, 0.1, 0.4])
    v = np.array([48.0, 2.0, 3.0, 0.1, -0.05, 0.08])
    other = aircraft.problem.rank_at(q, v)
    assert other.rank_CB == 6 and other.p == 2


def test_default_demand_meets_servo_constraints_and_forward_check(aircraft):
    r = solve_inverse(aircraft.problem, aircraft.demand(), method="bdf2", dt=2e-3)
    assert r.max_constraint_violation <= 1e-8
    assert r.rank_info.rank_CB == 6 and r.rank_info.p == 2
    assert len(r.partitions) >= 1
    # rtol 1e-8 (1e-10 takes 30 s and changes the figures by < 1e-5): the tracking error is
    # dominated by the O(h^2) control errors, measured 2.2e-5 m (x, y, h) and 7e-7 rad (phi)
    # over 20 s of open-loop flight (the phugoid and spiral modes are not damped by feedback)
    fc = forward_check(aircraft, r, rtol=1e-8)
    assert fc.success
    assert fc.max_error < 1e-4, fc.summary()
    # the manoeuvre is physically sensible: small angles, moderate sideslip and deflections
    tab = r.table
    V = np.sqrt(tab["u"] ** 2 + tab["v"] ** 2 + tab["w"] ** 2)
    beta = np.arcsin(tab["v"] / V)
    assert np.max(np.abs(beta)) < np.radians(6)
    for name in ("delta_a", "delta_e", "delta_r"):
        assert np.max(np.abs(tab[name])) < np.radians(10)
    assert 900 < tab["T"].min() and tab["T"].max() < 3000


@pytest.mark.parametrize("V", [50.0, 62.0])
def test_steady_level_flight_balances_the_forces(aircraft, V):
    p = aircraft.params
    h0 = p["h0"]
    demand = {
        "t_end": 1.0,
        "outputs": {
            "x": {"type": "polynomial", "coefficients": [0.0, V]},
            "y": {"type": "constant", "value": 0.0},
            "h": {"type": "constant", "value": h0},
            "phi": {"type": "constant", "value": 0.0},
        },
    }
    r = solve_inverse(aircraft.problem, demand, method="euler", dt=1e-2)
    tab = r.table
    # constant demand from a steady start: nothing changes (Newton tolerance)
    for name in [*CONTROLS, "theta", "u", "w", "z"]:
        col = tab[name].to_numpy()
        assert np.ptp(col) <= 1e-9 * max(1.0, np.max(np.abs(col))), name
    row = tab.iloc[-1]
    alpha = np.arctan2(row["w"], row["u"])
    Vb = np.sqrt(row["u"] ** 2 + row["v"] ** 2 + row["w"] ** 2)
    assert Vb == pytest.approx(V, rel=1e-12)
    assert row["theta"] == pytest.approx(alpha, abs=1e-12)  # level: flight-path angle 0
    assert max(abs(row[k]) for k in ("v", "p", "q", "r", "psi", "delta_a", "delta_r")) < 1e-12
    # analytic invariants of the derivative model: lift + thrust component = weight,
    # horizontal thrust component = drag, pitching moment zero
    qS = 0.5 * p["rho"] * V**2 * p["S"]
    CL, CD, _, _, Cm, _ = aero_coefficients(p, alpha, 0.0, de=row["delta_e"])
    L, D, W, T = qS * CL, qS * CD, p["mass"] * p["g"], row["T"]
    assert L + T * np.sin(alpha) == pytest.approx(W, rel=1e-10)
    assert T * np.cos(alpha) == pytest.approx(D, rel=1e-10)
    assert abs(Cm) < 1e-12
    # to first order in alpha: lift = weight, thrust = drag
    assert L == pytest.approx(W, rel=2 * abs(alpha) * D / W + 1e-12)
    trim = level_flight_trim(p, V)
    assert alpha == pytest.approx(trim["alpha"], abs=1e-12)
    assert T == pytest.approx(trim["T"], rel=1e-10)
    assert row["delta_e"] == pytest.approx(trim["delta_e"], abs=1e-12)


def test_euler_controls_converge_with_order_one(aircraft):
    # Richardson estimate on the default demand: |u_h - u_h/2| / |u_h/2 - u_h/4| -> 2^1;
    # measured 0.999, 1.004, 1.000, 1.000 for (delta_a, delta_e, delta_r, T)
    hs = (8e-3, 4e-3, 2e-3)
    sols = []
    for h in hs:
        r = solve_inverse(aircraft.problem, aircraft.demand(), method="euler", dt=h, jit=False)
        sols.append(r.table[CONTROLS].to_numpy()[:: round(hs[0] / h)])
    e1 = np.max(np.abs(sols[0] - sols[1]), axis=0)
    e2 = np.max(np.abs(sols[1] - sols[2]), axis=0)
    order = np.log2(e1 / e2)
    assert np.all((order > 0.9) & (order < 1.1)), order


def test_overrides_change_the_trim():
    heavy = get_system("aircraft", {"mass": 1200.0})
    assert heavy.params["mass"] == 1200.0
    light = level_flight_trim(get_system("aircraft").params, 50.0)
    assert level_flight_trim(heavy.params, 50.0)["alpha"] > light["alpha"]

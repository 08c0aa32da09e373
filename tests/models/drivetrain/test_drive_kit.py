"""Each submodel's assembled state space against hand-derived equations; kit invariants."""

from __future__ import annotations

import json

import casadi as ca
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from methods.errors import InputError
from models.drivetrain.kit import DriveTrainKit, assemble
from models.drivetrain.submodels import Submodel, parse_structure, rule_violations

F_TANH = 10.0


def _rhs(model, x, u, p):
    fun = ca.Function("r", [model.x, model.u, model.p], [model.rhs(), model.output()])
    xdot, y = fun(x, u, p)
    return np.asarray(xdot).ravel(), float(y)


def _hand_two_mass(x, u, J1, J2, c, d, friction=0.0):
    q1, q2, w1, w2 = x
    m_s = c * (q1 - q2) + d * (w1 - w2)
    return np.array([w1, w2, (u - m_s + friction) / J1, m_s / J2])


positive = st.floats(0.5, 2.0)
state = st.lists(st.floats(-2.0, 2.0), min_size=6, max_size=6)


@settings(max_examples=25, deadline=None)
@given(scale=st.lists(positive, min_size=4, max_size=4), x=state, u=st.floats(-3, 3))
def test_two_mass_matches_hand_derivation(scale, x, u):
    model = assemble(["two_mass"])
    p = np.array([0.01, 0.02, 50.0, 0.05]) * scale
    xdot, y = _rhs(model, x[:4], u, p)
    np.testing.assert_allclose(xdot, _hand_two_mass(x[:4], u, *p), rtol=1e-12, atol=1e-9)
    assert y == pytest.approx(x[2])  # output: velocity of inertia 1


@settings(max_examples=25, deadline=None)
@given(scale=st.lists(positive, min_size=5, max_size=5), x=state, u=st.floats(-3, 3))
def test_friction_and_gravity_submodels(scale, x, u):
    # one_mass + each friction part + gravity: J w' = u - f_v w - tanh(k w)(M_C + M_S e^-|w|/dq0) + M_G
    J, f_v, m_c, m_s, dq0 = np.array([0.01, 0.01, 0.2, 0.15, 1.0]) * scale
    m_g = 0.3 * (scale[0] - 1.0)
    w = x[1]
    cases = {
        ("viscous",): ([J, f_v], -f_v * w),
        ("coulomb",): ([J, m_c], -np.tanh(F_TANH * w) * m_c),
        ("stribeck",): ([J, m_s, dq0], -np.tanh(F_TANH * w) * m_s * np.exp(-abs(w) / dq0)),
        ("gravity",): ([J, m_g], m_g),
    }
    for extra, (p, torque) in cases.items():
        model = assemble(["one_mass", *extra], f_tanh=F_TANH)
        xdot, _y = _rhs(model, x[:2], u, np.array(p))
        np.testing.assert_allclose(xdot, [w, (u + torque) / J], rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(x=state, u=st.floats(-3, 3), t1=st.floats(0.001, 0.004))
def test_current_control_is_pt1_in_series(x, u, t1):
    model = assemble(["one_mass", "current_control"])
    xdot, _ = _rhs(model, x[:3], u, np.array([0.01, t1]))
    # states q1, dq1, i_L: J w' = i_L, i_L' = (u - i_L) / T_1
    # u - i_L cancels when u == i_L: an absolute tolerance covers the rounding of (u - i_L) / T_1
    np.testing.assert_allclose(xdot, [x[1], x[2] / 0.01, (u - x[2]) / t1], rtol=1e-12, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(x=state, alpha=st.floats(0.002, 0.01), lam_frac=st.floats(-1.2, 0.2))
def test_backlash_follows_nordin_zemke(x, alpha, lam_frac):
    model = assemble(["two_mass", "backlash"])
    J1, J2, c, d = 0.01, 0.02, 50.0, 0.05
    q1, q2, w1, w2 = x[:4]
    lam = lam_frac * 2 * alpha
    xdot, _ = _rhs(model, [q1, q2, w1, w2, lam], 0.0, np.array([J1, J2, c, d, alpha]))
    raw = (w1 - w2) + c / d * ((q1 - q2) - lam)  # seed eq. 5
    f_lam = min(0, raw) if lam >= 0 else (max(0, raw) if lam <= -2 * alpha else raw)
    m_b = c * ((q1 - q2) - lam) + d * ((w1 - w2) - f_lam)  # seed eqs. 3-4
    np.testing.assert_allclose(xdot, [w1, w2, -m_b / J1, m_b / J2, f_lam], rtol=1e-9, atol=1e-9)


def test_ladder_matrices_of_four_masses_are_symmetric_and_collocated():
    model = assemble(["four_mass"])
    num = model.numeric()
    A = np.array(num["A"])
    J = np.array([0.01, 0.02, 0.02, 0.02])
    K = -A[4:, :4] * J[:, None]  # M^-1 K scaled back by the inertias
    np.testing.assert_allclose(K, K.T)
    np.testing.assert_allclose(K.sum(axis=1), 0, atol=1e-12)  # rigid motion: no spring force
    assert num["B"] == [[0.0]] * 4 + [[100.0]] + [[0.0]] * 3
    assert num["C"] == [[0.0] * 4 + [1.0] + [0.0] * 3]


def test_kit_declare_then_setup_prints_codes_and_names():
    model = DriveTrainKit().add("two_mass", 5, "viscous", "7").setup()
    text = model.summary()
    assert "[2, 5, 6, 7]" in text and "stribeck" in text
    assert model.function().name() == "drive_2_5_6_7"
    json.dumps(model.to_dict({"J1": 0.011}))  # JSON-able


@pytest.mark.parametrize(
    "structure",
    [["coulomb"], ["one_mass", "two_mass"], ["one_mass", "backlash"], ["two_mass", "two_mass"]],
)
def test_construction_rules_reject_invalid_sets(structure):
    assert rule_violations(structure)
    with pytest.raises(InputError):
        parse_structure(structure)


def test_unknown_submodel_is_a_readable_error():
    with pytest.raises(InputError, match="unknown submodel"):
        Submodel.parse("five_mass")

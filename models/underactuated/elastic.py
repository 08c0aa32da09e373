"""Manipulators with elastic joints (Spong's reduced model), 1 and 2 links, vertical plane.

Link angles ``q_i`` (absolute for link 1 from the downward vertical, relative for link 2),
motor angles ``theta_i`` behind gear-free torsion springs ``K_i (q_i - theta_i)``; motor torques
``tau_i`` act on the rotors (inertia ``J_i``). Links: mass ``m_i``, length ``l_i``, centre of mass
at ``l_i / 2``, inertia about the centre ``m_i l_i^2 / 12``. Outputs: the link angle (1 link) or
the tip position ``(x, y)`` (2 links, ``y`` up). ``n = 2m``, ``p = 0`` (pure tangent realisation).

Exact (flat) solution of the one-link arm (:func:`elastic_joint_1_exact`), link inertia about
the joint ``I = m l^2 / 3``, output ``q = q1(t)``::

    I q'' + m g (l/2) sin q = K (theta - q)             (link)
    J theta'' = K (q - theta) + tau                     (rotor)
    => theta = q + (I q'' + m g (l/2) sin q) / K,
       tau   = J theta'' + I q'' + m g (l/2) sin q      (needs q'''')
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import pandas as pd

from methods.dae import Demand, ServoProblem
from models.underactuated.base import (
    Parameter,
    System,
    SystemSpec,
    lagrange_terms,
    point_kinetic_energy,
)


def _build_1(name, description, params, p) -> System:
    pb = ServoProblem(name)
    q = pb.coordinates(["q1", "theta1"], nominal=[0.0, 0.0])
    pb.controls(["tau1"])
    v = pb.velocities
    m, l, g = p["m1"], p["l1"], p["g"]
    com = ca.vertcat(l / 2 * ca.sin(q[0]), -l / 2 * ca.cos(q[0]))
    T = point_kinetic_energy(q, v, [m], [com], [m * l**2 / 12, p["J1"]], [v[0], v[1]])
    V = m * g * com[1] + 0.5 * p["K1"] * (q[0] - q[1]) ** 2
    M, d, f = lagrange_terms(q, v, T, V)
    pb.set_dynamics(M=M, d=d, f=f, G=ca.DM([[0], [1]]))
    pb.set_outputs(q[0], ["q1"])
    pb.setup()
    demand = {
        "t_end": 4.0,
        "outputs": {
            "q1": {"type": "step", "start": 0.0, "end": 1.2, "t0": 0.5, "t1": 3.0, "degree": 9}
        },
    }
    return System(
        name, description, params, pb, demand, lambda dem, t: elastic_joint_1_exact(p, dem, t)
    )


def elastic_joint_1_exact(p: dict, demand: Demand, t: np.ndarray) -> pd.DataFrame:
    """Flat solution of the one-link elastic joint for the demand ``q1(t)`` (module docstring).

    Columns as the inverse-simulation table: ``t_s, q1, theta1, v_q1, v_theta1, tau1``
    (s, rad, rad/s, N m); needs the demand's derivatives up to order 4.
    """
    q = demand.evaluate(["q1"], t, 4)[:, 0, :]  # (5, nt): q and its derivatives 1..4
    inertia, K, J = p["m1"] * p["l1"] ** 2 / 3, p["K1"], p["J1"]
    mgl = p["m1"] * p["g"] * p["l1"] / 2
    s, c = np.sin(q[0]), np.cos(q[0])
    theta = q[0] + (inertia * q[2] + mgl * s) / K
    dtheta = q[1] + (inertia * q[3] + mgl * c * q[1]) / K
    ddtheta = q[2] + (inertia * q[4] + mgl * (c * q[2] - s * q[1] ** 2)) / K
    tau = J * ddtheta + inertia * q[2] + mgl * s
    return pd.DataFrame(
        {"t_s": t, "q1": q[0], "theta1": theta, "v_q1": q[1], "v_theta1": dtheta, "tau1": tau}
    )


def _tip(q1, q2, l1, l2):
    j2 = ca.vertcat(l1 * ca.sin(q1), -l1 * ca.cos(q1))
    return j2, j2 + l2 * ca.vertcat(ca.sin(q1 + q2), -ca.cos(q1 + q2))


def _build_2(name, description, params, p) -> System:
    pb = ServoProblem(name)
    q_start = [0.4, 0.8]
    q = pb.coordinates(["q1", "q2", "theta1", "theta2"], nominal=[*q_start, *q_start])
    pb.controls(["tau1", "tau2"])
    v = pb.velocities
    m1, m2, l1, l2, g = p["m1"], p["m2"], p["l1"], p["l2"], p["g"]
    j2, tip = _tip(q[0], q[1], l1, l2)
    c1 = ca.vertcat(l1 / 2 * ca.sin(q[0]), -l1 / 2 * ca.cos(q[0]))
    c2 = j2 + l2 / 2 * ca.vertcat(ca.sin(q[0] + q[1]), -ca.cos(q[0] + q[1]))
    T = point_kinetic_energy(
        q,
        v,
        [m1, m2],
        [c1, c2],
        [m1 * l1**2 / 12, m2 * l2**2 / 12, p["J1"], p["J2"]],
        [v[0], v[0] + v[1], v[2], v[3]],
    )
    V = g * (m1 * c1[1] + m2 * c2[1])
    V += 0.5 * p["K1"] * (q[0] - q[2]) ** 2 + 0.5 * p["K2"] * (q[1] - q[3]) ** 2
    M, d, f = lagrange_terms(q, v, T, V)
    G = ca.DM([[0, 0], [0, 0], [1, 0], [0, 1]])
    pb.set_dynamics(M=M, d=d, f=f, G=G)
    pb.set_outputs(tip, ["x", "y"])
    pb.setup()
    tipf = ca.Function("tip", [q], [tip])
    a = np.asarray(tipf([*q_start, 0, 0])).ravel()
    b = np.asarray(tipf([1.0, 0.5, 0, 0])).ravel()
    demand = {
        "t_end": 4.0,
        "paths": [
            {
                "axes": ["x", "y"],
                "waypoints": [a.round(6).tolist(), b.round(6).tolist()],
                "times": [0.5],
                "durations": [2.5],
                "degree": 9,
            }
        ],
    }
    return System(name, description, params, pb, demand)


_LINK1 = (
    Parameter("m1", 1.0, "kg", "link 1 mass"),
    Parameter("l1", 0.5, "m", "link 1 length"),
    Parameter("J1", 0.05, "kg m^2", "motor 1 rotor inertia"),
    Parameter("K1", 100.0, "N m/rad", "joint 1 stiffness"),
)
_G = Parameter("g", 9.81, "m/s^2", "gravity")

ELASTIC_JOINT_1 = SystemSpec(
    "elastic_joint_1",
    "one-link arm with an elastic joint: motor torque tau1 moves the link angle q1",
    (*_LINK1, _G),
    _build_1,
)
ELASTIC_JOINT_2 = SystemSpec(
    "elastic_joint_2",
    "two-link arm with elastic joints (vertical plane): motor torques move the tip along (x, y)",
    (
        *_LINK1,
        Parameter("m2", 0.8, "kg", "link 2 mass"),
        Parameter("l2", 0.4, "m", "link 2 length"),
        Parameter("J2", 0.03, "kg m^2", "motor 2 rotor inertia"),
        Parameter("K2", 80.0, "N m/rad", "joint 2 stiffness"),
        _G,
    ),
    _build_2,
)

"""Cranes: planar overhead crane (3 DOF), overhead trolley crane and rotary crane (5 DOF).

Common parts: the load (point mass ``m``) hangs on a massless rope of length ``l`` wound on a
winch drum (radius ``r``, inertia ``J``: kinetic energy ``J (l'/r)^2 / 2``); the winch torque
``M_w`` > 0 winds the rope in, so its generalised force on ``l`` is ``-M_w / r``. Swing angles
``theta1`` (in the x-z / radial plane) and ``theta2`` (out of it) place the load at
``suspension point + l (sin th1 cos th2, sin th2, -cos th1 cos th2)`` in the frame of the
suspension point's motion; ``z`` points up, gravity ``g`` down. Outputs: load position.

Planar crane (trolley ``m_t`` at ``s``; ``x = s + l sin th``, ``z = -l cos th``): flat
solution ``tan th = -x''/(z''+g)``, ``S = m sqrt(x''^2 + (z''+g)^2)``, ``s = x - z x''/(z''+g)``,
``l = -z sqrt(x''^2+(z''+g)^2)/(z''+g)``, ``F = m_t s'' + m x''``, ``M_w = r S - (J/r) l''``
(docs/methods.md §3; this model reproduces it, see the tests).
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
    eval_jets,
    jet_derivative,
    lagrange_terms,
    point_kinetic_energy,
)

_L_MIN = 0.05  # m: shorter ropes are outside the model (load at the trolley)


def _rope(l, th1, th2=0.0):
    return l * ca.vertcat(ca.sin(th1) * ca.cos(th2), ca.sin(th2), -ca.cos(th1) * ca.cos(th2))


def _finish(pb: ServoProblem, q, T, V, G, load, names) -> ServoProblem:
    M, d, f = lagrange_terms(q, pb.velocities, T, V)
    pb.set_dynamics(M=M, d=d, f=f, G=G)
    pb.set_outputs(load, names)
    return pb.setup()


# -- planar overhead crane -------------------------------------------------------------------
def _build_planar(name, description, params, p) -> System:
    pb = ServoProblem(name)
    q = pb.coordinates(["s", "l", "theta"], nominal=[0.0, 2.0, 0.0], bounds={"l": (_L_MIN, np.inf)})
    pb.controls(["F", "M_w"])
    s, l, th = q[0], q[1], q[2]
    load = ca.vertcat(s + l * ca.sin(th), -l * ca.cos(th))
    v = pb.velocities
    T = point_kinetic_energy(q, v, [p["m_t"], p["m"]], [s, load], [p["J"]], [v[1] / p["r"]])
    V = p["m"] * p["g"] * load[1]
    G = ca.DM([[1, 0], [0, -1 / p["r"]], [0, 0]])
    pb = _finish(pb, q, T, V, G, load, ["x", "z"])
    demand = {
        "t_end": 8.0,
        "outputs": {
            "x": {"type": "step", "start": 0.0, "end": 3.0, "t0": 1.0, "t1": 6.0, "degree": 9},
            "z": {"type": "step", "start": -2.0, "end": -1.5, "t0": 2.0, "t1": 6.0, "degree": 9},
        },
    }
    return System(
        name, description, params, pb, demand, lambda dem, t: planar_crane_exact(p, dem, t)
    )


def planar_crane_exact(p: dict, demand: Demand, t: np.ndarray) -> pd.DataFrame:
    """Flat solution of the planar crane (columns as the inverse-simulation table)."""
    X, Z = ca.SX.sym("X", 7), ca.SX.sym("Z", 7)  # x, z and derivatives up to order 6
    g, m, m_t, r, J = p["g"], p["m"], p["m_t"], p["r"], p["J"]
    a, b = X[2], Z[2] + g
    root = ca.sqrt(a**2 + b**2)
    th = ca.atan2(-a, b)
    l = -Z[0] * root / b
    s = X[0] - Z[0] * a / b
    S = m * root
    jets = [X, Z]
    ds, dl, dth = (jet_derivative(e, jets) for e in (s, l, th))
    dds, ddl = jet_derivative(ds, jets), jet_derivative(dl, jets)
    F = m_t * dds + m * X[2]
    Mw = r * S - J / r * ddl
    fun = ca.Function("exact", [X, Z], [ca.vertcat(s, l, th, ds, dl, dth, F, Mw)])
    vals = eval_jets(fun, demand, ["x", "z"], t, 6)
    names = ["s", "l", "theta", "v_s", "v_l", "v_theta", "F", "M_w"]
    return pd.DataFrame({"t_s": t, **{nm: vals[i] for i, nm in enumerate(names)}})


# -- overhead trolley crane (5 DOF) ----------------------------------------------------------
def _build_trolley(name, description, params, p) -> System:
    pb = ServoProblem(name)
    q = pb.coordinates(
        ["s1", "s2", "l", "theta1", "theta2"],
        nominal=[0.0, 0.0, 2.0, 0.0, 0.0],
        bounds={"l": (_L_MIN, np.inf)},
    )
    pb.controls(["F1", "F2", "M_w"])
    s1, s2, l, th1, th2 = (q[i] for i in range(5))
    v = pb.velocities
    load = ca.vertcat(s1, s2, 0) + _rope(l, th1, th2)
    T = point_kinetic_energy(
        q, v, [p["m1"], p["m2"], p["m"]], [s1, ca.vertcat(s1, s2), load], [p["J"]], [v[2] / p["r"]]
    )
    V = p["m"] * p["g"] * load[2]
    G = ca.DM.zeros(5, 3)
    G[0, 0], G[1, 1], G[2, 2] = 1, 1, -1 / p["r"]
    pb = _finish(pb, q, T, V, G, load, ["x", "y", "z"])
    demand = {
        "t_end": 10.0,
        "outputs": {
            "x": {"type": "step", "start": 0.0, "end": 2.0, "t0": 1.0, "t1": 6.0, "degree": 9},
            "y": {"type": "step", "start": 0.0, "end": 1.0, "t0": 2.0, "t1": 7.0, "degree": 9},
            "z": {"type": "step", "start": -2.0, "end": -1.0, "t0": 3.0, "t1": 8.0, "degree": 9},
        },
    }
    return System(name, description, params, pb, demand)


# -- rotary crane (5 DOF) --------------------------------------------------------------------
def _build_rotary(name, description, params, p) -> System:
    pb = ServoProblem(name)
    q = pb.coordinates(
        ["phi", "s", "l", "theta1", "theta2"],
        nominal=[0.0, 2.0, 2.0, 0.0, 0.0],
        bounds={"l": (_L_MIN, np.inf), "s": (0.1, np.inf)},
    )
    pb.controls(["M_b", "F", "M_w"])
    phi, s, l, th1, th2 = (q[i] for i in range(5))
    v = pb.velocities
    e_r = ca.vertcat(ca.cos(phi), ca.sin(phi), 0)
    e_t = ca.vertcat(-ca.sin(phi), ca.cos(phi), 0)
    rope = _rope(l, th1, th2)  # components along e_r, e_t, z
    trolley = s * e_r
    load = trolley + rope[0] * e_r + rope[1] * e_t + ca.vertcat(0, 0, rope[2])
    T = point_kinetic_energy(
        q, v, [p["m_t"], p["m"]], [trolley, load], [p["J_b"], p["J"]], [v[0], v[2] / p["r"]]
    )
    V = p["m"] * p["g"] * load[2]
    G = ca.DM.zeros(5, 3)
    G[0, 0], G[1, 1], G[2, 2] = 1, 1, -1 / p["r"]
    pb = _finish(pb, q, T, V, G, load, ["x", "y", "z"])
    demand = {
        "t_end": 10.0,
        "paths": [
            {
                "axes": ["x", "y", "z"],
                "waypoints": [[2.0, 0.0, -2.0], [1.2, 1.6, -1.5]],
                "times": [1.0],
                "durations": [7.0],
                "degree": 9,
            }
        ],
    }
    return System(name, description, params, pb, demand)


_ROPE_PARAMS = (
    Parameter("m", 5.0, "kg", "load mass"),
    Parameter("r", 0.05, "m", "winch drum radius"),
    Parameter("J", 0.01, "kg m^2", "winch drum inertia"),
    Parameter("g", 9.81, "m/s^2", "gravity"),
)

PLANAR_CRANE = SystemSpec(
    "planar_crane",
    "planar overhead crane: trolley force F and winch torque M_w move the load along (x, z)",
    (Parameter("m_t", 10.0, "kg", "trolley mass"), *_ROPE_PARAMS),
    _build_planar,
)
TROLLEY_CRANE = SystemSpec(
    "trolley_crane",
    "overhead trolley crane (5 DOF: s1, s2, l, theta1, theta2); F1, F2, M_w move the load in 3-D",
    (
        Parameter("m1", 30.0, "kg", "girder (bridge) mass, moves with s1 and carries the trolley"),
        Parameter("m2", 10.0, "kg", "trolley mass, moves with s1 and s2"),
        *_ROPE_PARAMS,
    ),
    _build_trolley,
)
ROTARY_CRANE = SystemSpec(
    "rotary_crane",
    "rotary (tower) crane (5 DOF: phi, s, l, theta1, theta2); slewing torque M_b, trolley force F, "
    "winch torque M_w move the load in 3-D",
    (
        Parameter("J_b", 50.0, "kg m^2", "boom inertia about the tower axis"),
        Parameter("m_t", 10.0, "kg", "trolley mass on the boom"),
        *_ROPE_PARAMS,
    ),
    _build_rotary,
)

"""Surface ship following a path with a speed profile (3 DOF, kinematic form ``q' = A(q) v``).

Coordinates ``(x, y, psi)`` (earth-fixed position, m; heading, rad), body velocities
``(u, v, r)`` (surge, sway m/s; yaw rate rad/s). Manoeuvring model after Fossen (1995), model
scale (CyberShip-II-like numbers), diagonal mass matrix including added mass::

    x' = u cos psi - v sin psi,  y' = u sin psi + v cos psi,  psi' = r
    m11 u' - m22 v r         = -d_u u - d_uu |u| u + T
    m22 v' + m11 u r         = -d_v v - d_vr r
    m33 r' + (m22 - m11) u v = -d_rv v - d_r r + N_delta u^2 delta

Controls: rudder angle ``delta`` (rad) and thrust ``T`` (N). The rudder is modelled as a pure
yaw moment proportional to ``u^2`` (its sway force is neglected, as in the flatness literature:
with it, the demanded point would have to be the ship's pivot point). Outputs: the position
``(x, y)`` as functions of time, i.e. the path and the speed along it. ``p = 1 = 2m - n``.
The start is steady straight motion at the initial speed. Damping is chosen so that the ship is
directionally stable up to ~1 m/s (``d_v d_r > (m11 u + d_vr)((m22 - m11) u + d_rv)``): with
the Munk moment of a less damped hull the open-loop forward check diverges exponentially.
"""

from __future__ import annotations

import casadi as ca

from methods.dae import ServoProblem
from models.underactuated.base import Parameter, System, SystemSpec


def _build(name, description, params, p) -> System:
    pb = ServoProblem(name)
    U0 = p["U0"]
    q = pb.coordinates(
        ["x", "y", "psi"],
        nominal=[0.0, 0.0, 0.0],
        velocity_names=["u_surge", "v_sway", "r_yaw"],
        v_nominal=[U0, 0.0, 0.0],
    )
    pb.controls(["delta", "T"])
    nu = pb.velocities
    u, v, r = nu[0], nu[1], nu[2]
    psi = q[2]
    A = ca.SX.zeros(3, 3)
    A[0, 0], A[0, 1], A[1, 0], A[1, 1], A[2, 2] = (
        ca.cos(psi),
        -ca.sin(psi),
        ca.sin(psi),
        ca.cos(psi),
        1,
    )
    pb.set_kinematics(A)
    m11, m22, m33 = p["m11"], p["m22"], p["m33"]
    d = ca.vertcat(-m22 * v * r, m11 * u * r, (m22 - m11) * u * v)
    f = ca.vertcat(
        -p["d_u"] * u - p["d_uu"] * ca.fabs(u) * u,
        -p["d_v"] * v - p["d_vr"] * r,
        -p["d_rv"] * v - p["d_r"] * r,
    )
    G = ca.SX.zeros(3, 2)
    G[2, 0] = p["N_delta"] * u**2
    G[0, 1] = 1
    pb.set_dynamics(M=ca.diag(ca.DM([m11, m22, m33])), d=d, f=f, G=G)
    pb.set_outputs(ca.vertcat(q[0], q[1]), ["x", "y"])
    pb.setup()
    demand = {
        "t_end": 40.0,
        "outputs": {
            "x": {
                "type": "velocity_step",
                "v_start": U0,
                "v_end": 1.5 * U0,
                "t0": 10.0,
                "t1": 30.0,
                "degree": 9,
            },
            "y": {"type": "step", "start": 0.0, "end": 3.0, "t0": 5.0, "t1": 35.0, "degree": 9},
        },
    }
    return System(name, description, params, pb, demand)


SHIP = SystemSpec(
    "ship",
    "surface ship (3 DOF, model scale): rudder and thrust make the ship follow a path x(t), y(t)",
    (
        Parameter("m11", 25.8, "kg", "surge mass incl. added mass"),
        Parameter("m22", 33.8, "kg", "sway mass incl. added mass"),
        Parameter("m33", 2.76, "kg m^2", "yaw inertia incl. added inertia"),
        Parameter("d_u", 0.72, "kg/s", "linear surge damping"),
        Parameter("d_uu", 1.33, "kg/m", "quadratic surge damping"),
        Parameter("d_v", 20.0, "kg/s", "sway damping"),
        Parameter("d_vr", 0.0, "kg m/s", "sway damping due to yaw rate", positive=False),
        Parameter("d_rv", 0.0, "kg m/s", "yaw damping due to sway", positive=False),
        Parameter("d_r", 8.0, "kg m^2/s", "yaw damping"),
        Parameter("N_delta", 20.0, "kg", "rudder yaw moment per rad and (m/s)^2"),
        Parameter("U0", 0.5, "m/s", "initial (steady) speed; default demand speeds up to 1.5 U0"),
    ),
    _build,
)

"""Aircraft in prescribed trajectory flight (6 DOF rigid body, kinematic form ``q' = A(q) v``).

After Blajer, Graffstein and Krawczyk (2001), Fig. 5 of the seed: ``n = 6``, ``m = 4``
controls ``u = (delta_a, delta_e, delta_r, T)`` (aileron, elevator, rudder in rad; thrust in N),
``k = n - m = 2``.

Frames and states (standard flight-mechanics conventions, Etkin / Stevens & Lewis):

- earth frame NED: ``x`` north, ``y`` east, ``z`` **down** (m); the vertical output is the
  altitude ``h = -z`` (so gravity acts along ``+z`` here, unlike the other systems' ``-z``);
- attitude by Euler angles ``phi, theta, psi`` (roll, pitch, yaw; rad, sequence z-y-x);
- body frame FRD (x forward, y right wing, z down), body velocities
  ``v = (u, v, w, p, q, r)`` (m/s, rad/s).

Kinematics ``q' = A(q) v`` with ``A = blkdiag(R_nb(phi, theta, psi), E(phi, theta))``::

    R_nb = Rz(psi) Ry(theta) Rx(phi)   (body -> earth),
    E    = [[1, sin(phi) tan(theta),  cos(phi) tan(theta)],
            [0, cos(phi),            -sin(phi)           ],
            [0, sin(phi)/cos(theta),  cos(phi)/cos(theta)]].

Dynamics (Newton-Euler in body axes; ``M v' + d = f + G u``, ``B = -G^T``)::

    M = blkdiag(m I_3, J),  J = [[Ixx, 0, -Ixz], [0, Iyy, 0], [-Ixz, 0, Izz]]   (kg, kg m^2)
    d = [m w x V_b ; w x J w]         (V_b = (u, v, w), w = (p, q, r))
    f = [F_aero + m g (-s_theta, s_phi c_theta, c_phi c_theta) ; (L, M, N)_aero without controls]
    G u = [T, 0, 0, qbar S b (Cl_da da + Cl_dr dr), qbar S c Cm_de de, qbar S b (Cn_da da + Cn_dr dr)]

Aerodynamics with linear derivatives (plus the parabolic drag polar), ``V = |V_b|``,
``alpha = atan2(w, u)``, ``beta = asin(v / V)``, ``qbar = rho V^2 / 2``, rates made
non-dimensional with ``b / (2V)`` (p, r) and ``c / (2V)`` (q)::

    C_L = C_L0 + C_La alpha            C_D = C_D0 + K C_L^2          C_Y = C_Yb beta
    C_l = C_lb beta + C_lp p^ + C_lr r^ + C_lda da + C_ldr dr
    C_m = C_m0 + C_ma alpha + C_mq q^ + C_mde de
    C_n = C_nb beta + C_np p^ + C_nr r^ + C_nda da + C_ndr dr

    X = qbar S (C_L sin(alpha) - C_D cos(alpha)),  Y = qbar S C_Y,
    Z = -qbar S (C_L cos(alpha) + C_D sin(alpha))                 (stability-axis resolution)

The thrust acts along the body x axis through the centre of mass; the density ``rho`` is
constant (no altitude dependence; the manoeuvres span tens of metres).

**Choice of the demands (outputs).** The servo-constraints must be functions of ``q`` only,
so the flight speed and the sideslip (velocity quantities) cannot be servo-constraints
themselves. As for the ship, the trajectory *and* the speed along it are prescribed by the
position as a function of time: ``Phi = (x, y, h, phi)`` where

- ``y(t), h(t)``: the two trajectory coordinates (lateral and vertical path),
- ``x(t)``: the along-track position; its rate sets the flight speed
  ``V(t) = sqrt(x'^2 + y'^2 + h'^2)`` (no wind; ``V = x'`` on straight level legs),
- ``phi(t)``: the bank angle, the attitude condition relative to the trajectory (the
  remaining attitude, ``theta`` and ``psi``, i.e. angle of attack and sideslip, follows from
  the force balance).

Well-posedness: with this choice, ``C_v = dPhi/dq A = [[R_nb, 0], [0, e_phi^T E]]``. The
control surfaces produce moments only (their lift/side-force contributions, like the force
derivatives with respect to the rates, are neglected -- the usual assumption of the inverse
simulation literature, cf. the ship's rudder), so in ``P = C_v M^-1 B^T`` the three
position rows see only the thrust and the bank row only the moments: ``p = rank P = 2 = 2m - n``
(mixed orthogonal/tangent realisation), and ``rank([C_v; B]) = 6`` because the rudder and
aileron moment vectors ``(C_lda, C_nda)`` and ``(C_ldr, C_ndr)`` are independent and the
elevator gives the pitching moment. The system is then flat: the translational equations
``m (a - g) = R_nb (F_aero(alpha, beta) + T e_x)`` give ``theta, psi, T`` algebraically from
``r'', r'`` and ``phi`` (``q`` needs ``gamma''``), the rates need ``gamma'''`` and the three
moment equations give the surface deflections from ``gamma''''`` (``demand_order = 4``).
Prescribing ``beta = 0`` instead of ``phi`` would be a velocity-level (non-holonomic) servo
constraint outside the framework; keeping the control-surface force derivatives would raise
``p`` to 4 and leave unprescribed zero dynamics.

Steady level flight (constant demand ``x = V t``, ``y, h, phi`` constant) is the trim
``theta = alpha``, ``beta = 0``, rates zero, ``L + T sin(alpha) = W``, ``T cos(alpha) = D``,
``C_m = 0`` and ``delta_a = delta_r = 0`` (:func:`level_flight_trim`).

Default parameters: a small four-seat trainer (Cessna-172-class; mass, geometry, inertias and
derivatives of the Roskam data set, converted to SI and rounded). Default demand: a climbing
lateral offset ("S-turn") at 50 -> 54 m/s: 40 m to the right and 20 m up within 14 s, banking
about 10 degrees into the turn and back, over 20 s.
"""

from __future__ import annotations

import math

import casadi as ca
from scipy.optimize import brentq

from methods.dae import ServoProblem
from models.underactuated.base import Parameter, System, SystemSpec

__all__ = ["AIRCRAFT", "aero_coefficients", "level_flight_trim"]


def _rot(phi, theta, psi):
    """``R_nb`` (body -> NED earth) and the Euler-rate matrix ``E`` (CasADi SX)."""
    cf, sf, ct, st, cp, sp = (
        ca.cos(phi),
        ca.sin(phi),
        ca.cos(theta),
        ca.sin(theta),
        ca.cos(psi),
        ca.sin(psi),
    )
    R = ca.vertcat(
        ca.horzcat(ct * cp, sf * st * cp - cf * sp, cf * st * cp + sf * sp),
        ca.horzcat(ct * sp, sf * st * sp + cf * cp, cf * st * sp - sf * cp),
        ca.horzcat(-st, sf * ct, cf * ct),
    )
    E = ca.vertcat(
        ca.horzcat(1, sf * st / ct, cf * st / ct),
        ca.horzcat(0, cf, -sf),
        ca.horzcat(0, sf / ct, cf / ct),
    )
    return R, E


def aero_coefficients(p: dict, alpha, beta, phat=0.0, qhat=0.0, rhat=0.0, da=0.0, de=0.0, dr=0.0):
    """``(C_L, C_D, C_Y, C_l, C_m, C_n)`` of the derivative model (works on floats and SX)."""
    CL = p["CL0"] + p["CLa"] * alpha
    CD = p["CD0"] + p["K"] * CL**2
    CY = p["CYb"] * beta
    Cl = p["Clb"] * beta + p["Clp"] * phat + p["Clr"] * rhat + p["Clda"] * da + p["Cldr"] * dr
    Cm = p["Cm0"] + p["Cma"] * alpha + p["Cmq"] * qhat + p["Cmde"] * de
    Cn = p["Cnb"] * beta + p["Cnp"] * phat + p["Cnr"] * rhat + p["Cnda"] * da + p["Cndr"] * dr
    return CL, CD, CY, Cl, Cm, Cn


def level_flight_trim(p: dict, V: float) -> dict[str, float]:
    """Steady straight level flight at speed ``V`` (m/s): ``alpha`` (= theta, rad), thrust ``T``
    (N), elevator ``delta_e`` (rad), lift and drag (N), from ``L + T sin(alpha) = W`` and
    ``T cos(alpha) = D`` (force balance along and across the horizontal velocity) and
    ``C_m = 0``; ``beta = delta_a = delta_r = 0``."""
    qS = 0.5 * p["rho"] * V**2 * p["S"]
    W = p["mass"] * p["g"]

    def lift_drag(a):
        CL, CD, *_ = aero_coefficients(p, a, 0.0)
        return qS * CL, qS * CD

    def vertical(a):
        L, D = lift_drag(a)
        return L + D * math.tan(a) - W  # T = D / cos(alpha) substituted

    a = brentq(vertical, -0.3, 0.5, xtol=1e-15)
    L, D = lift_drag(a)
    de = -(p["Cm0"] + p["Cma"] * a) / p["Cmde"]
    return {"alpha": a, "T": D / math.cos(a), "delta_e": de, "lift": L, "drag": D, "weight": W}


def _s_turn_demand(V0: float, h0: float, bank: float) -> dict:
    """The default demand: from trimmed level flight at ``V0`` and altitude ``h0``, accelerate
    to ``V0 + 4`` m/s, move 40 m to the right and climb 20 m, banking to ``bank`` into the
    turn, to ``-bank`` and back to wings level, over 20 s (smooth steps of degree 9)."""
    deg = 9
    return {
        "t_end": 20.0,
        "outputs": {
            "x": {
                "type": "velocity_step",
                "v_start": V0,
                "v_end": V0 + 4.0,
                "t0": 2.0,
                "t1": 16.0,
                "degree": deg,
            },
            "y": {"type": "step", "start": 0.0, "end": 40.0, "t0": 3.0, "t1": 17.0, "degree": deg},
            "h": {
                "type": "step",
                "start": h0,
                "end": h0 + 20.0,
                "t0": 3.0,
                "t1": 17.0,
                "degree": deg,
            },
            "phi": {
                "type": "steps",
                "start": 0.0,
                "degree": deg,
                "moves": [
                    {"to": bank, "t0": 3.0, "t1": 7.0},
                    {"to": -bank, "t0": 8.5, "t1": 11.5},
                    {"to": 0.0, "t0": 13.0, "t1": 17.0},
                ],
            },
        },
    }


def _build(name, description, params, p) -> System:
    V0, h0 = p["V0"], p["h0"]
    trim = level_flight_trim(p, V0)
    a0 = trim["alpha"]
    pb = ServoProblem(name)
    q = pb.coordinates(
        ["x", "y", "z", "phi", "theta", "psi"],
        nominal=[0.0, 0.0, -h0, 0.0, a0, 0.0],
        velocity_names=["u", "v", "w", "p", "q", "r"],
        v_nominal=[V0 * math.cos(a0), 0.0, V0 * math.sin(a0), 0.0, 0.0, 0.0],
        bounds={"theta": (-1.4, 1.4)},  # Euler-angle singularity at |theta| = pi/2
    )
    pb.controls(["delta_a", "delta_e", "delta_r", "T"])
    nu = pb.velocities
    phi, theta, psi = q[3], q[4], q[5]
    Vb, w = nu[0:3], nu[3:6]
    R, E = _rot(phi, theta, psi)
    A = ca.SX.zeros(6, 6)
    A[0:3, 0:3] = R
    A[3:6, 3:6] = E
    pb.set_kinematics(A)

    mass, S, b, c, rho, g = p["mass"], p["S"], p["b"], p["c"], p["rho"], p["g"]
    J = ca.DM([[p["Ixx"], 0, -p["Ixz"]], [0, p["Iyy"], 0], [-p["Ixz"], 0, p["Izz"]]])
    M = ca.DM.zeros(6, 6)
    M[0:3, 0:3] = mass * ca.DM.eye(3)
    M[3:6, 3:6] = J
    d = ca.vertcat(mass * ca.cross(w, Vb), ca.cross(w, ca.mtimes(J, w)))

    V = ca.sqrt(ca.sumsqr(Vb))
    alpha = ca.atan2(Vb[2], Vb[0])
    beta = ca.asin(Vb[1] / V)
    qS = 0.5 * rho * V**2 * S
    CL, CD, CY, Cl, Cm, Cn = aero_coefficients(
        p, alpha, beta, w[0] * b / (2 * V), w[1] * c / (2 * V), w[2] * b / (2 * V)
    )
    ca_, sa = ca.cos(alpha), ca.sin(alpha)
    F_aero = qS * ca.vertcat(CL * sa - CD * ca_, CY, -(CL * ca_ + CD * sa))
    F_grav = mass * g * ca.vertcat(-ca.sin(theta), ca.sin(phi) * ca.cos(theta), R[2, 2])
    f = ca.vertcat(F_aero + F_grav, qS * b * Cl, qS * c * Cm, qS * b * Cn)
    G = ca.SX.zeros(6, 4)
    G[3, 0], G[5, 0] = qS * b * p["Clda"], qS * b * p["Cnda"]
    G[4, 1] = qS * c * p["Cmde"]
    G[3, 2], G[5, 2] = qS * b * p["Cldr"], qS * b * p["Cndr"]
    G[0, 3] = 1
    pb.set_dynamics(M=M, d=d, f=f, G=G)
    pb.set_outputs(ca.vertcat(q[0], q[1], -q[2], phi), ["x", "y", "h", "phi"])
    pb.setup()

    return System(name, description, params, pb, _s_turn_demand(V0, h0, p["bank"]))


_DEG = math.pi / 180

AIRCRAFT = SystemSpec(
    "aircraft",
    "aircraft (6 DOF rigid body, linear aerodynamic derivatives): aileron, elevator, rudder and "
    "thrust make it fly a prescribed path y(t), h(t) with speed (x(t)) and bank angle phi(t)",
    (
        Parameter("mass", 1043.0, "kg", "aircraft mass"),
        Parameter("Ixx", 1285.0, "kg m^2", "roll moment of inertia (body axes)"),
        Parameter("Iyy", 1825.0, "kg m^2", "pitch moment of inertia"),
        Parameter("Izz", 2667.0, "kg m^2", "yaw moment of inertia"),
        Parameter("Ixz", 0.0, "kg m^2", "product of inertia (body x-z)", positive=False),
        Parameter("S", 16.2, "m^2", "wing reference area"),
        Parameter("b", 10.9, "m", "wing span"),
        Parameter("c", 1.49, "m", "mean aerodynamic chord"),
        Parameter("rho", 1.225, "kg/m^3", "air density (constant)"),
        Parameter("g", 9.81, "m/s^2", "gravity"),
        Parameter("CL0", 0.307, "-", "lift coefficient at zero angle of attack", positive=False),
        Parameter("CLa", 4.41, "1/rad", "lift-curve slope dC_L/dalpha"),
        Parameter("CD0", 0.031, "-", "zero-lift drag coefficient"),
        Parameter("K", 0.054, "-", "induced-drag factor 1/(pi e AR) of C_D = C_D0 + K C_L^2"),
        Parameter("CYb", -0.393, "1/rad", "side-force derivative dC_Y/dbeta", positive=False),
        Parameter("Clb", -0.0923, "1/rad", "dihedral effect dC_l/dbeta", positive=False),
        Parameter("Clp", -0.484, "1/rad", "roll damping dC_l/d(pb/2V)", positive=False),
        Parameter("Clr", 0.0798, "1/rad", "roll due to yaw rate dC_l/d(rb/2V)", positive=False),
        Parameter("Clda", 0.229, "1/rad", "aileron roll power dC_l/ddelta_a", positive=False),
        Parameter("Cldr", 0.0147, "1/rad", "roll due to rudder dC_l/ddelta_r", positive=False),
        Parameter("Cm0", 0.04, "-", "pitching moment at zero alpha", positive=False),
        Parameter("Cma", -0.613, "1/rad", "pitch stiffness dC_m/dalpha", positive=False),
        Parameter("Cmq", -12.4, "1/rad", "pitch damping dC_m/d(qc/2V)", positive=False),
        Parameter("Cmde", -1.122, "1/rad", "elevator power dC_m/ddelta_e", positive=False),
        Parameter("Cnb", 0.0587, "1/rad", "weathercock stability dC_n/dbeta", positive=False),
        Parameter("Cnp", -0.0278, "1/rad", "yaw due to roll rate dC_n/d(pb/2V)", positive=False),
        Parameter("Cnr", -0.0937, "1/rad", "yaw damping dC_n/d(rb/2V)", positive=False),
        Parameter("Cnda", -0.0216, "1/rad", "adverse yaw dC_n/ddelta_a", positive=False),
        Parameter("Cndr", -0.0645, "1/rad", "rudder yaw power dC_n/ddelta_r", positive=False),
        Parameter("V0", 50.0, "m/s", "initial trimmed speed; default demand accelerates to V0 + 4"),
        Parameter("h0", 300.0, "m", "initial altitude; default demand climbs 20 m"),
        Parameter("bank", 10.0 * _DEG, "rad", "bank angle of the default S-turn", positive=False),
    ),
    _build,
)

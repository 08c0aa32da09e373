"""Consistent start of the inverse simulation: the steady state on the demand at ``t_start``.

Rest, or constant velocity for ships/aircraft, from ``Phi(q) = gamma``, ``C_v v = gamma'``,
``f - d - B^T u = 0`` (``v' = 0``), ``xi = 0``, solved by Gauss-Newton with minimum-norm steps
from the nominal state. A problem with ``steady_closure`` set (a lab's own system,
models/underactuated/user.py) also requires the state to stay steady: ``d/dt (f - d - B^T u) =
0`` along ``q' = A v`` with a free control rate ``u'`` (otherwise a velocity that only meets a
dissipative force, e.g. a crank's bearing friction ``-b v``, is left to the minimum-norm step
and the start is not at rest). The built-in systems keep the plain equations.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from methods.dae.demand import Demand
from methods.dae.problem import InverseProblemError, ServoProblem

__all__ = ["consistent_start"]

_START_TOL = 1e-9  # residual of the consistent start (output units / forces scaled by row norm)
_STEADY_TOL = 1e-9  # |gamma''|, |gamma'''|, |gamma''''| at t_start counted as zero


def _cache(problem: ServoProblem) -> dict:
    if not hasattr(problem, "_compiled"):
        problem._compiled = {}
    return problem._compiled


def _closure(pb: ServoProblem) -> bool:
    return bool(getattr(pb, "steady_closure", False))  # problems pickled before the flag


def _start_function(pb: ServoProblem) -> ca.Function:
    c = _cache(pb)
    if "start" not in c:
        q, v, u = pb.q, pb.v, pb.u
        g = ca.SX.sym("g", pb.m, 3)
        force = pb.generalized_force()
        parts = [pb.Phi - g[:, 0], ca.mtimes(pb.Cv, v) - g[:, 1], force, g[:, 2] - pb.Cdot_v]
        w = ca.vertcat(q, v, u)
        if _closure(pb):
            du = ca.SX.sym("du", pb.m)
            qdot = ca.mtimes(pb.A, v)
            parts.append(
                ca.mtimes(ca.jacobian(force, q), qdot) + ca.mtimes(ca.jacobian(force, u), du)
            )
            w = ca.vertcat(w, du)
        r = ca.vertcat(*parts)
        c["start"] = ca.Function("start", [w, g], [r, ca.jacobian(r, w)])
    return c["start"]


def consistent_start(pb: ServoProblem, demand: Demand, t0: float) -> tuple[np.ndarray, ...]:
    """Steady state ``(q0, v0, u0)`` on the demand at ``t0`` (see module docstring)."""
    gam = demand.evaluate(pb.output_names, np.array([t0]), 4)[:, :, 0]  # (5, m)
    if np.max(np.abs(gam[2:4])) > _STEADY_TOL * max(1.0, np.max(np.abs(gam[:2]))):
        raise InverseProblemError(
            f"demand at t = {t0:g} s is not steady (gamma'' or gamma''' nonzero): the "
            "inverse simulation starts from rest or steady motion; start the demand earlier.",
            time=t0,
        )
    fun = _start_function(pb)
    w = np.r_[pb.q_nominal, pb.v_nominal, np.zeros(pb.m * (2 if _closure(pb) else 1))]
    g = gam[:3].T
    res = np.inf
    for _ in range(50):
        r, J = (np.asarray(x) for x in fun(w, g))
        r = r.ravel()
        s = 1.0 / np.maximum(np.abs(J).sum(axis=1), 1.0)
        res = float(np.max(np.abs(r * s)))
        if res < _START_TOL * 1e-3:
            break
        dw = np.linalg.lstsq(J * s[:, None], r * s, rcond=1e-12)[0]
        w = w - dw
        if np.max(np.abs(dw) / (1 + np.abs(w))) < 1e-14:
            break
    if not res < _START_TOL:
        raise InverseProblemError(
            f"no consistent steady start at t = {t0:g} s (residual {res:.3g}): the demanded "
            "initial output is not an equilibrium reachable from the nominal state; check the "
            "demand's start values and the parameters.",
            time=t0,
        )
    n = pb.n
    return w[:n], w[n : 2 * n], w[2 * n : 2 * n + pb.m]

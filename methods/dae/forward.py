"""Forward check: integrate the original equations with the computed controls.

``q' = A(q) v``, ``M(q) v' = f - d - B^T u(t)`` with ``u(t)`` the cubic-spline interpolant of
the inverse solution's controls, from the solution's initial state, by ``scipy.integrate
.solve_ivp`` (tight tolerances). Reports the largest deviation of the outputs ``Phi(q(t))``
from the demand. Underactuated systems have internal (zero) dynamics that are at best
marginally stable (pendulums, springs): the O(h^k) errors of the controls excite them, so the
tracking error measures the accuracy of the controls and grows with the horizon; it is not a
closed-loop property.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import casadi as ca
import numpy as np
from scipy.integrate import solve_ivp
from scipy.interpolate import CubicSpline

from methods.dae.problem import ServoProblem
from methods.dae.result import InverseResult
from methods.errors import InputError

__all__ = ["ForwardCheck", "forward_check"]


@dataclass(frozen=True)
class ForwardCheck:
    """Max tracking error per output (output units), the integrator used and its cost."""

    max_tracking_error: dict[str, float]
    integrator: str
    rtol: float
    n_rhs: int
    wall_time_s: float
    success: bool
    message: str

    @property
    def max_error(self) -> float:
        return max(self.max_tracking_error.values())

    def summary(self) -> str:
        errs = ", ".join(f"{k}: {v:.3g}" for k, v in self.max_tracking_error.items())
        return (
            f"forward check ({self.integrator}, rtol {self.rtol:g}): max tracking error {errs}; "
            f"{self.n_rhs} rhs evaluations, {self.wall_time_s:.2f} s"
            + ("" if self.success else f"; integration failed: {self.message}")
        )

    def to_dict(self) -> dict:
        return {
            "max_tracking_error": {k: float(v) for k, v in self.max_tracking_error.items()},
            "max_error": float(self.max_error),
            "integrator": self.integrator,
            "rtol": self.rtol,
            "n_rhs": int(self.n_rhs),
            "wall_time_s": float(self.wall_time_s),
            "success": bool(self.success),
        }


def forward_check(
    system_or_problem, result: InverseResult, *, integrator: str = "LSODA", rtol: float = 1e-10
) -> ForwardCheck:
    """Re-simulate ``result`` with its controls; ``system_or_problem``: a System or ServoProblem."""
    pb: ServoProblem = getattr(system_or_problem, "problem", system_or_problem)
    if pb.name != result.problem_name:
        raise InputError(f"result is for {result.problem_name!r}, not for {pb.name!r}")
    tab = result.table
    t = tab["t_s"].to_numpy()
    n = pb.n
    U = CubicSpline(t, tab[list(pb.control_names)].to_numpy(), axis=0)
    rhs_fun = ca.Function("rhs", [pb.q, pb.v, pb.u], [ca.vertcat(*pb.fun_ode(pb.q, pb.v, pb.u))])
    rhs_jac = ca.Function(
        "rhs_jac",
        [pb.q, pb.v, pb.u],
        [ca.jacobian(rhs_fun(pb.q, pb.v, pb.u), ca.vertcat(pb.q, pb.v))],
    )

    def rhs(tt, x):
        return np.asarray(rhs_fun(x[:n], x[n:], U(tt))).ravel()

    def jac(tt, x):
        return np.asarray(rhs_jac(x[:n], x[n:], U(tt)))

    x0 = np.r_[
        tab[list(pb.coordinate_names)].iloc[0].to_numpy(),
        tab[list(pb.velocity_names)].iloc[0].to_numpy(),
    ]
    wall = time.perf_counter()
    kwargs = {"jac": jac} if integrator in ("Radau", "BDF", "LSODA") else {}
    sol = solve_ivp(
        rhs, (t[0], t[-1]), x0, method=integrator, t_eval=t, rtol=rtol, atol=rtol, **kwargs
    )
    wall = time.perf_counter() - wall
    k = sol.y.shape[1]
    phi = np.asarray(ca.Function("phi", [pb.q], [pb.Phi]).map(k)(sol.y[:n]))
    gam = result.demand.evaluate(pb.output_names, t[:k], 0)[0]
    errs = {nm: float(np.max(np.abs(phi[i] - gam[i]))) for i, nm in enumerate(pb.output_names)}
    return ForwardCheck(
        errs, integrator, rtol, int(sol.nfev), wall, bool(sol.success), str(sol.message)
    )

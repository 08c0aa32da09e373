"""Projection of the equations of motion by coordinate partitioning (docs/methods.md §3).

``C_v = [U W]`` after a column permutation with ``W`` (m x m) invertible; the null-space matrix
is ``D = [I; -W^-1 U]`` (n x k, ``C_v D = 0``), permuted back. The partition is chosen
numerically by QR with column pivoting of ``C_v`` at a state: the first ``m`` pivot columns
form ``W`` (the best-conditioned choice QR offers). The solver re-checks ``cond(W)`` along the
solution and re-partitions when it degrades.

Index-3 system in ``y = (q, v, u)`` (``k = n - m``)::

    q' = A(q) v
    D^T M v' = D^T (f - d - B^T u)                (k equations)
    0 = xi + C_v M^-1 (d - f + B^T u)             (m equations, "b = 0")
    0 = Phi(q) - gamma(t)                          (m equations)
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np
import scipy.linalg as sla

from methods.dae.problem import InverseProblemError, ServoProblem

__all__ = ["COND_REPIVOT", "COND_SINGULAR", "Partition", "choose_partition", "projected_parts"]

COND_REPIVOT = 1e6  # re-partition when cond(W) exceeds this (still accurate, but degrading)
COND_SINGULAR = 1e12  # no partition better than this: C_v has (numerically) lost rank


@dataclass(frozen=True)
class Partition:
    """Dependent (``W``) and independent (``U``) columns of ``C_v``; ``cond`` of ``W``."""

    dependent: tuple[int, ...]
    independent: tuple[int, ...]
    cond: float

    def to_dict(self) -> dict:
        return {
            "dependent": list(self.dependent),
            "independent": list(self.independent),
            "cond": self.cond,
        }


def choose_partition(Cv: np.ndarray, time: float | None = None, names=None) -> Partition:
    """Pick ``W`` by QR with column pivoting; raise when every choice is singular."""
    m, n = Cv.shape
    _, _, piv = sla.qr(Cv, pivoting=True, mode="economic")
    dep = tuple(sorted(int(i) for i in piv[:m]))
    ind = tuple(i for i in range(n) if i not in dep)
    cond = float(np.linalg.cond(Cv[:, dep])) if m else 1.0
    if not np.isfinite(cond) or cond > COND_SINGULAR:
        where = f" at t = {time:.6g} s" if time is not None else ""
        raise InverseProblemError(
            f"singular partition{where}: the output Jacobian C = dPhi/dq has lost rank "
            f"(best cond(W) = {cond:.3g}); the demanded outputs are not independent at this "
            "configuration. Change the demand so that it avoids this configuration.",
            time=time,
        )
    return Partition(dep, ind, cond)


def projected_parts(problem: ServoProblem, partition: Partition) -> ca.Function:
    """SX Function ``parts(q, v, u, gamma, gamma_dd) -> (A v, H = D^T M, h, b, c)``.

    ``H v' = h`` are the k projected dynamic equations, ``b`` (m) the constraint-projected
    algebraic equations, ``c`` (m) the servo-constraints.
    """
    pb = problem
    q, v, u = pb.q, pb.v, pb.u
    n, m = pb.n, pb.m
    gam = ca.SX.sym("gam", m)
    gamdd = ca.SX.sym("gamdd", m)
    Cv = pb.Cv
    W = Cv[:, list(partition.dependent)]
    U = Cv[:, list(partition.independent)]
    X = ca.solve(W, U) if m > 1 else U / W  # m x k
    k = n - m
    D = ca.SX.zeros(n, k)
    for j, i in enumerate(partition.independent):
        D[i, j] = 1
    for r, i in enumerate(partition.dependent):
        D[i, :] = -X[r, :]
    force = pb.generalized_force()
    H = ca.mtimes(D.T, pb.M)
    h = ca.mtimes(D.T, force)
    xi = gamdd - pb.Cdot_v
    b = xi - ca.mtimes(Cv, ca.solve(pb.M, force))
    c = pb.Phi - gam
    return ca.Function(
        "parts",
        [q, v, u, gam, gamdd],
        [ca.mtimes(pb.A, v), H, h, b, c],
        ["q", "v", "u", "gamma", "gamma_dd"],
        ["qdot", "H", "h", "b", "c"],
    )

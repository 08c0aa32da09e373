"""Fixed-step solvers for the projected index-3 system: backward Euler, BDF2, Radau IIA (s=3).

Unknowns per stage, scaled for index awareness (as RADAU5 scales index-2/3 components by
``h``, ``h^2`` in its norms): ``y = (q, h v, h^2 u)``. With this scaling the Newton increments
of all components are compared in one weighted max-norm
``max_i |dy_i| / (1 + |y_i|) <= tol`` — i.e. velocity and control increments are weighted by
``h`` and ``h^2`` — and the Jacobian blocks are O(1) instead of O(h^-1), O(h^-2).

Step equations (``H = D^T M``, ``h_`` the projected forces, see ``projection``):

* linear multistep (Euler ``alpha = (1, -1), beta = 1``; BDF2
  ``alpha = (1, -4/3, 1/3), beta = 2/3``)::

      sum_j alpha_j q_{n+1-j} - beta h A(q) v = 0
      H(q) sum_j alpha_j (h v)_{n+1-j} - beta h^2 h_(q, v, u) = 0
      b(q, v, u, t_{n+1}) = 0,  Phi(q) - gamma(t_{n+1}) = 0        (all at t_{n+1})

* Radau IIA (stiffly accurate, ``y_{n+1} = Y_3``), stage ``i`` with ``W = A_radau^-1``::

      sum_j W_ij (Q_j - q_n) - h A(Q_i) V_i = 0,  H_i sum_j W_ij (h V_j - h v_n) - h^2 h_i = 0
      b_i = 0,  Phi(Q_i) - gamma(t_n + c_i h) = 0

Newton: exact sparse Jacobian (CasADi AD), rows scaled by their 1-norm each iteration (the
unscaled condition grows like ``h^-3``), a fixed number of iterations unrolled inside one
compiled CasADi function and mapped over a chunk of steps (``mapaccum``): one call per chunk
instead of one per iteration. Each step reports the iterations it needed (increments above
``tol``) and the last increment; a step whose last increment is still above ``tol`` is redone
by :func:`newton_step` with more iterations, and reported as a failure if that fails too.
Step size is fixed (no error control), which is what the convergence studies need.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import casadi as ca
import numpy as np

from methods.errors import InputError

__all__ = ["CompiledScheme", "Method", "compile_scheme", "newton_step"]

_S6 = np.sqrt(6.0)
RADAU_C = np.array([(4 - _S6) / 10, (4 + _S6) / 10, 1.0])
RADAU_A = np.array(
    [
        [(88 - 7 * _S6) / 360, (296 - 169 * _S6) / 1800, (-2 + 3 * _S6) / 225],
        [(296 + 169 * _S6) / 1800, (88 + 7 * _S6) / 360, (-2 - 3 * _S6) / 225],
        [(16 - _S6) / 36, (16 + _S6) / 36, 1 / 9],
    ]
)
RADAU_W = np.linalg.inv(RADAU_A)


class Method(StrEnum):
    """Time stepping of the index-3 DAE: euler implicit (backward) Euler; bdf2 second-order
    backward differentiation; radau three-stage Radau IIA (stiffly accurate)."""

    EULER = "euler"
    BDF2 = "bdf2"
    RADAU = "radau"

    @classmethod
    def parse(cls, value) -> Method:
        try:
            return cls(value)
        except ValueError:
            raise InputError(
                f"method must be one of {[m.value for m in cls]}, got {value!r}"
            ) from None

    @property
    def stage_times(self) -> np.ndarray:
        return RADAU_C if self is Method.RADAU else np.array([1.0])


_LMM = {Method.EULER: ((1.0, -1.0, 0.0), 1.0), Method.BDF2: ((1.0, -4 / 3, 1 / 3), 2 / 3)}


@dataclass(frozen=True)
class CompiledScheme:
    """Compiled step of one method for one problem, partition and step size.

    ``chunk(X, P) -> (Y, iters, err)``: ``X`` history ``(y_n, y_{n-1})`` scaled (2N),
    ``P`` (n_p x L) per-step parameters (stage times, gamma, gamma'' per stage), ``Y`` (N x L)
    scaled solutions, ``iters`` (1 x L) Newton iterations, ``err`` (1 x L) last weighted
    increment. ``rj(Z, X, p) -> (r, J)`` residual and Jacobian of one step (for fallbacks).
    """

    method: Method
    h: float
    n_y: int
    n_stages: int
    chunk_len: int
    chunk: ca.Function
    rj: ca.Function
    tol: float


def _residual(method: Method, parts: ca.Function, n: int, m: int, h: float):
    N = 2 * n + m
    ns = len(method.stage_times)
    Z = ca.SX.sym("Z", ns * N)
    X = ca.SX.sym("X", 2 * N)
    Pm = ca.SX.sym("P", ns * (1 + 2 * m))
    gam = ca.reshape(Pm[ns : ns + m * ns], m, ns)
    gdd = ca.reshape(Pm[ns + m * ns :], m, ns)

    def split(y):
        return y[:n], y[n : 2 * n], y[2 * n :]

    stages = [split(Z[i * N : (i + 1) * N]) for i in range(ns)]
    hist = [split(X[:N]), split(X[N:])]
    res = []
    for i, (q, vs, us) in enumerate(stages):
        qdot, H, hh, b, c = parts(q, vs / h, us / h**2, gam[:, i], gdd[:, i])
        if method is Method.RADAU:
            dq = sum(RADAU_W[i, j] * (stages[j][0] - hist[0][0]) for j in range(ns))
            dv = sum(RADAU_W[i, j] * (stages[j][1] - hist[0][1]) for j in range(ns))
            beta = 1.0
        else:
            (a0, a1, a2), beta = _LMM[method]
            dq = a0 * q + a1 * hist[0][0] + a2 * hist[1][0]
            dv = a0 * vs + a1 * hist[0][1] + a2 * hist[1][1]
        res += [dq - beta * h * qdot, ca.mtimes(H, dv) - beta * h**2 * hh, b, c]
    r = ca.vertcat(*res)
    return Z, X, Pm, r, N, ns


def compile_scheme(
    method: Method,
    parts: ca.Function,
    n: int,
    m: int,
    h: float,
    *,
    tol: float = 1e-10,
    iterations: int | None = None,
    chunk_len: int = 500,
    linear_solver: str = "qr",
    jit: bool = False,
) -> CompiledScheme:
    """Build the step residual, its exact sparse Jacobian and the unrolled Newton chunk."""
    Z, X, Pm, r, N, ns = _residual(method, parts, n, m, h)
    J = ca.jacobian(r, Z)
    rj = ca.Function("rj", [Z, X, Pm], [r, J])
    K = iterations or (3 if ns == 1 else 4)

    Xm = ca.MX.sym("X", 2 * N)
    Pmx = ca.MX.sym("P", Pm.numel())
    y0, y1 = Xm[:N], Xm[N:]
    # predictor: linear extrapolation through the last two steps (stage times for Radau)
    z = ca.vertcat(*[y0 + float(ci) * (y0 - y1) for ci in method.stage_times])
    errs = []
    for _ in range(K):
        rv, Jv = rj(z, Xm, Pmx)
        s = 1.0 / (ca.sum2(ca.fabs(Jv)) + 1e-300)
        dz = ca.solve(ca.mtimes(ca.diag(s), Jv), s * rv, linear_solver)
        z = z - dz
        errs.append(ca.mmax(ca.fabs(dz) / (1.0 + ca.fabs(z))))
    iters = 1
    for e in errs[:-1]:
        iters = iters + (e > tol)
    y_new = z[(ns - 1) * N :]
    step = ca.Function("step", [Xm, Pmx], [ca.vertcat(y_new, y0), y_new, iters, errs[-1]])
    # mapaccum accumulates the first output; the others are stacked per step
    chunk = step.mapaccum("chunk", chunk_len, [0], [0])
    if jit:  # C code via the system compiler: ~5-10x faster per step, ~2-5 s to compile
        opts = {
            "jit": True,
            "compiler": "shell",
            "jit_options": {"flags": ["-O1"], "verbose": False},
        }
        chunk = ca.Function("chunk_jit", chunk.mx_in(), chunk.call(chunk.mx_in()), opts)
    return CompiledScheme(method, h, N, ns, chunk_len, chunk, rj, tol)


def newton_step(
    scheme: CompiledScheme, X: np.ndarray, p: np.ndarray, z0: np.ndarray, max_iter: int = 30
) -> tuple[np.ndarray | None, int, float]:
    """Plain Newton for one step (fallback): ``(z or None, iterations, last error)``."""
    z = z0.copy()
    err = np.inf
    for it in range(1, max_iter + 1):
        rv, Jv = scheme.rj(z, X, p)
        rv, Jv = np.asarray(rv).ravel(), np.asarray(ca.densify(Jv))
        s = 1.0 / (np.abs(Jv).sum(axis=1) + 1e-300)
        try:
            dz = np.linalg.solve(Jv * s[:, None], rv * s)
        except np.linalg.LinAlgError:
            return None, it, np.inf
        if not np.all(np.isfinite(dz)):
            return None, it, np.inf
        z = z - dz
        err = float(np.max(np.abs(dz) / (1.0 + np.abs(z))))
        if not np.isfinite(err):
            return None, it, err
        if err <= scheme.tol:
            return z, it, err
    return None, max_iter, err

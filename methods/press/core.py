"""Compiled residual core: one CasADi Function per (model, n_q), then a small numpy LM solver.

Because the model response ``h(p, q)`` (n_q, n_S) is the same for every series, the weighted
least-squares cost over all residuals ``l = (i, j, k)`` with 0/1 weights ``w_ijk`` reduces
exactly to aggregated residuals over ``(j, k)``:

    1/2 sum_ijk w_ijk (h_jk - z_ijk)^2 / sigma_k^2
      = 1/2 sum_jk W_jk (h_jk - zbar_jk)^2 + const,

with ``W_jk = sum_i w_ijk / sigma_k^2`` and ``zbar_jk`` the weighted series mean. The same holds
for the Gauss-Newton matrix ``J^T Omega J = sum_jk W_jk grad h_jk grad h_jk^T`` and for Bard's
second-order term ``S = sum_l w_l r_l Hess r_l = sum_jk W_jk (h_jk - zbar_jk) Hess h_jk``.
So a split or sensor mask is only a weight vector, and one compiled function serves all tests.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import casadi as ca
import numpy as np

from methods.errors import InputError


class CompiledModel:
    """``hJ(p, q) -> (h, J)`` with h (n_q*n_S,) in (step, sensor) C-order, J (n_q*n_S, n_p);
    ``S(p, q, v) -> sum_l v_l Hess_p h_l`` (n_p, n_p).

    Evaluation goes through CasADi ``FunctionBuffer`` objects bound to preallocated numpy
    arrays (about 15x less call overhead than ``Function.__call__`` with DM conversion); the
    buffers are per thread so thread-pool workers can share one compiled model.
    """

    def __init__(self, n_p: int, n_q: int, n_s: int, hJ: Any, S: Any) -> None:
        self.n_p, self.n_q, self.n_s = n_p, n_q, n_s
        self.hJ, self.S = hJ, S
        self._local = threading.local()

    def _buffers(self) -> SimpleNamespace:
        b = getattr(self._local, "b", None)
        if b is None:
            n_l = self.n_q * self.n_s
            b = SimpleNamespace(
                p=np.zeros(self.n_p), q=np.zeros(self.n_q), v=np.zeros(n_l),
                h=np.zeros(n_l), Jt=np.zeros((self.n_p, n_l)), H=np.zeros((self.n_p, self.n_p)),
            )  # fmt: skip
            b.buf1, b.ev1 = self.hJ.buffer()
            b.buf2, b.ev2 = self.S.buffer()
            for buf, args, res in (
                (b.buf1, (b.p, b.q), (b.h, b.Jt)),
                (b.buf2, (b.p, b.q, b.v), (b.H,)),
            ):
                for i, a in enumerate(args):
                    buf.set_arg(i, memoryview(a))
                for i, r in enumerate(res):
                    buf.set_res(i, memoryview(r))
            self._local.b = b
        return b

    def eval_hJ(self, p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = self._buffers()
        b.p[:] = p
        b.q[:] = q
        b.ev1()
        # dense column-major J (n_l, n_p) lands in the C-order (n_p, n_l) buffer as J^T
        return b.h.copy(), b.Jt.T.copy()

    def eval_S(self, p: np.ndarray, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        b = self._buffers()
        b.p[:] = p
        b.q[:] = q
        b.v[:] = v
        b.ev2()
        return b.H.copy()


_CACHE: dict[tuple[int, int], tuple[object, CompiledModel]] = {}


def compile_model(model: Any, n_q: int) -> CompiledModel:
    """Build (once per model object and scenario length) the CasADi functions of the core."""
    key = (id(model), n_q)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    n_p = len(model.parameters)
    n_s = len(model.sensors)
    p = ca.SX.sym("p", n_p)
    q = ca.SX.sym("q", n_q)
    try:
        H = ca.SX(model.response(p, q))
    except Exception as exc:  # a user model that cannot take CasADi symbols
        raise InputError(
            f"model {getattr(model, 'name', model)!r}: response(p, forces) must evaluate on "
            f"CasADi symbols (use casadi fmax/fmin/sqrt, not numpy branches): {exc}"
        ) from exc
    if H.shape != (n_q, n_s):
        raise InputError(f"model response has shape {H.shape}, expected ({n_q}, {n_s})")
    h = ca.vec(H.T)  # (step, sensor) order: index j * n_S + k
    v = ca.SX.sym("v", n_q * n_s)
    J = ca.jacobian(h, p)
    Hv = ca.hessian(ca.dot(v, h), p)[0]
    comp = CompiledModel(
        n_p,
        n_q,
        n_s,
        ca.Function("press_hJ", [p, q], [h, ca.densify(J)]),
        ca.Function("press_S", [p, q, v], [ca.densify(Hv)]),
    )
    _CACHE[key] = (model, comp)
    return comp


@dataclass(frozen=True)
class LSResult:
    p: np.ndarray
    cost: float
    success: bool
    message: str
    n_iter: int


def solve_ls(
    comp: CompiledModel,
    q: np.ndarray,
    zbar: np.ndarray,
    wt: np.ndarray,
    p0: np.ndarray,
    scale: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    max_iter: int = 100,
    xtol: float = 1e-8,
    second_order: bool = True,
) -> LSResult:
    """Levenberg-Marquardt on ``1/2 sum_l wt_l (h_l(p) - zbar_l)^2`` in scaled ``x = p / scale``.

    ``zbar``, ``wt``: flat (n_q*n_S,). Gauss-Newton model ``J^T W J`` with LM damping; after
    15 iterations without convergence (large residuals: GN converges only linearly) the full
    Hessian ``J^T W J + S`` is used whenever it is positive definite. Bounds by
    projection of each trial step (a bound hit is reported in the message).
    """
    sw = np.sqrt(wt)
    lo, hi = lower / scale, upper / scale
    x = np.clip(p0 / scale, lo, hi)
    h, J = comp.eval_hJ(x * scale, q)
    r = sw * (h - zbar)
    cost = 0.5 * float(r @ r)
    lam = 1e-6  # nearly Gauss-Newton: the press residuals are close to linear in 1/k
    msg, ok = "maximum number of iterations reached", False
    for it in range(1, max_iter + 1):
        Js = (sw[:, None] * J) * scale
        g = Js.T @ r
        A = Js.T @ Js
        if second_order and it > 15:
            As = A + comp.eval_S(x * scale, q, wt * (h - zbar)) * np.outer(scale, scale)
            if np.linalg.eigvalsh(0.5 * (As + As.T))[0] > 1e-12 * np.trace(A):
                A = As
        d = np.maximum(np.diag(A), 1e-300)
        while True:
            try:
                dx = -np.linalg.solve(A + lam * np.diag(d), g)
            except np.linalg.LinAlgError:
                dx = -np.linalg.lstsq(A + lam * np.diag(d), g, rcond=None)[0]
            x_new = np.clip(x + dx, lo, hi)
            h_new, J_new = comp.eval_hJ(x_new * scale, q)
            r_new = sw * (h_new - zbar)
            cost_new = 0.5 * float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new <= cost:
                break
            lam *= 10.0
            if lam > 1e12:
                return LSResult(x * scale, cost, cost == 0.0, "no descent step found", it)
        step = float(np.max(np.abs(x_new - x)))
        small_gain = cost - cost_new <= 1e-15 * max(cost, 1e-300)
        x, h, J, r, cost = x_new, h_new, J_new, r_new, cost_new
        lam = max(lam / 10.0, 1e-12)
        if step <= xtol * (1.0 + float(np.max(np.abs(x)))) or (small_gain and step < 1e-6):
            msg, ok = "converged (relative step below tolerance)", True
            break
    if ok and (np.any(x <= lo) or np.any(x >= hi)):
        msg = "converged at a parameter bound"
    return LSResult(x * scale, cost, ok, msg, it)


def parameter_arrays(
    model: Any,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Names, start values, scales and lower/upper bounds (inf where unbounded)."""
    names = list(model.parameters)
    p0 = np.array([float(model.parameters[n]) for n in names])
    bounds = getattr(model, "bounds", None) or {}
    lo = np.array([float(bounds.get(n, (-np.inf, np.inf))[0]) for n in names])
    hi = np.array([float(bounds.get(n, (-np.inf, np.inf))[1]) for n in names])
    # scale by the start value (stiffnesses ~1e3 N/um, friction ~1e-2); 1 for zero starts
    scale = np.where(np.abs(p0) > 0, np.abs(p0), 1.0)
    return names, p0, scale, lo, hi

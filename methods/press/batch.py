"""Vectorised fits: many weighted least-squares problems of one model at once.

The tests of ``hypothesis`` differ only in their 0/1 weights, so all calibration and
validation fits of a batch run together: one mapped CasADi call per LM iteration evaluates
``h`` and ``J`` for every fit, and the LM algebra is batched numpy (``(N, n_p, n_p)`` solves).
This removes the per-fit Python overhead that dominates a one-fit-at-a-time loop.
"""

from __future__ import annotations

import numpy as np

from methods.press.core import CompiledModel
from methods.press.covariance import COND_MAX


class _Mapped:
    """``hJ`` and ``S`` mapped over N parameter sets, bound to numpy buffers.

    CasADi stores dense matrices column-major, so the C-ordered arrays below are exactly the
    mapped inputs/outputs: P (N, n_p) is p (n_p x N); h (N, n_l) is h (n_l x N); Jt
    (N, n_p, n_l) holds J_n^T; V (N, n_l); H (N, n_p, n_p) holds S_n^T (= S_n).
    """

    def __init__(self, comp: CompiledModel, n: int) -> None:
        n_l, n_p = comp.n_q * comp.n_s, comp.n_p
        self.P, self.q = np.zeros((n, n_p)), np.zeros(comp.n_q)
        self.V, self.h = np.zeros((n, n_l)), np.zeros((n, n_l))
        self.Jt, self.H = np.zeros((n, n_p, n_l)), np.zeros((n, n_p, n_p))
        # q is shared by all N evaluations (reduce_in: not repeated)
        self.buf1, self.ev1 = comp.hJ.map("hJ_map", "serial", n, [1], []).buffer()
        self.buf2, self.ev2 = comp.S.map("S_map", "serial", n, [1], []).buffer()
        for buf, args, res in (
            (self.buf1, (self.P, self.q), (self.h, self.Jt)),
            (self.buf2, (self.P, self.q, self.V), (self.H,)),
        ):
            # numpy's stubs declare ndarray.__buffer__ only for Python >= 3.12 (we check 3.11)
            for i, a in enumerate(args):
                buf.set_arg(i, memoryview(a))  # type: ignore[arg-type]
            for i, r in enumerate(res):
                buf.set_res(i, memoryview(r))  # type: ignore[arg-type]


def _mapped(comp: CompiledModel, n: int) -> _Mapped:
    cache = comp._local.__dict__.setdefault("maps", {})  # per thread, like comp's buffers
    if n not in cache:
        if len(cache) > 8:
            cache.clear()
        cache[n] = _Mapped(comp, n)
    return cache[n]


def eval_hJ_batch(comp: CompiledModel, P: np.ndarray, q: np.ndarray):
    """h (N, n_l) and J (N, n_l, n_p) for parameter rows P (N, n_p)."""
    m = _mapped(comp, P.shape[0])
    m.P[:] = P
    m.q[:] = q
    m.ev1()
    return m.h.copy(), m.Jt.transpose(0, 2, 1).copy()


def eval_S_batch(comp: CompiledModel, P: np.ndarray, q: np.ndarray, V: np.ndarray) -> np.ndarray:
    """sum_l V_l Hess h_l for every row: (N, n_p, n_p)."""
    m = _mapped(comp, P.shape[0])
    m.P[:] = P
    m.q[:] = q
    m.V[:] = V
    m.ev2()
    return m.H.transpose(0, 2, 1).copy()


def solve_ls_batch(
    comp: CompiledModel,
    q: np.ndarray,
    zbar: np.ndarray,
    wt: np.ndarray,
    p0: np.ndarray,
    scale: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    max_iter: int = 60,
    xtol: float = 1e-8,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LM (same rules as ``core.solve_ls``, Gauss-Newton matrix) for N problems at once.

    ``zbar``, ``wt``: (N, n_l). Returns estimates (N, n_p), costs (N,), converged (N,).
    A rejected trial step raises that problem's damping and is retried next iteration.
    """
    n = zbar.shape[0]
    n_p = p0.size
    sw = np.sqrt(wt)
    lo, hi = lower / scale, upper / scale
    X = np.tile(np.clip(p0 / scale, lo, hi), (n, 1))
    h, J = eval_hJ_batch(comp, X * scale, q)
    R = sw * (h - zbar)
    cost = 0.5 * np.einsum("nl,nl->n", R, R)
    lam = np.full(n, 1e-6)
    done = np.zeros(n, dtype=bool)
    eye = np.eye(n_p)
    for _ in range(max_iter):
        Js = sw[:, :, None] * J * scale
        JsT = Js.transpose(0, 2, 1)
        g = (JsT @ R[:, :, None])[..., 0]
        A = JsT @ Js  # batched BLAS; einsum is several times slower here
        d = np.maximum(np.einsum("npp->np", A), 1e-300)
        dX = -np.linalg.solve(A + lam[:, None, None] * d[:, :, None] * eye, g[:, :, None])[..., 0]
        dX[done] = 0.0
        Xn = np.clip(X + dX, lo, hi)
        hn, Jn = eval_hJ_batch(comp, Xn * scale, q)
        Rn = sw * (hn - zbar)
        cn = 0.5 * np.einsum("nl,nl->n", Rn, Rn)
        acc = ~done & np.isfinite(cn) & (cn <= cost)
        step = np.max(np.abs(Xn - X), axis=1)
        X[acc], h[acc], J[acc], R[acc], cost[acc] = Xn[acc], hn[acc], Jn[acc], Rn[acc], cn[acc]
        lam = np.where(acc, np.maximum(lam / 10.0, 1e-12), lam * 10.0)
        conv = acc & (step <= xtol * (1.0 + np.max(np.abs(X), axis=1)))
        done |= conv | (lam > 1e12)
        if done.all():
            break
    ok = done & (lam <= 1e12)
    return X * scale, cost, ok


def covariance_batch(
    comp: CompiledModel,
    q: np.ndarray,
    P: np.ndarray,
    zbar: np.ndarray,
    wt: np.ndarray,
    scale: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Bard's C for every row (N, n_p, n_p) (C1 where A is not positive definite; inf where
    the scaled information is singular, cond > 1e12) and an identifiable mask (N,)."""
    h, J = eval_hJ_batch(comp, P, q)
    M = J.transpose(0, 2, 1) @ (wt[:, :, None] * J)
    S = eval_S_batch(comp, P, q, wt * (h - zbar))
    D = np.outer(scale, scale)
    Ms, As = M * D, (M + S) * D
    Ms = 0.5 * (Ms + Ms.transpose(0, 2, 1))
    As = 0.5 * (As + As.transpose(0, 2, 1))
    ev = np.linalg.eigvalsh(Ms)
    ident = (ev[:, 0] > 0) & (ev[:, -1] <= COND_MAX * np.maximum(ev[:, 0], 1e-300))
    n, n_p = P.shape
    C = np.full((n, n_p, n_p), np.inf)
    if ident.any():
        Mi = np.linalg.inv(Ms[ident])
        Asi = As[ident]
        pd = np.linalg.eigvalsh(Asi)[:, 0] > 0
        Ai = np.linalg.inv(np.where(pd[:, None, None], Asi, Ms[ident]))
        Cs = np.where(pd[:, None, None], Ai @ Ms[ident] @ Ai, Mi)
        C[ident] = Cs * D
    return C, ident

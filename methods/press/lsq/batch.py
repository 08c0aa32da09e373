"""Vectorised fits: many weighted least-squares problems of one model at once.

The tests of ``hypothesis`` differ only in their 0/1 weights, so all calibration and
validation fits of a batch run together: one mapped CasADi call per LM iteration evaluates
``h`` and ``J`` for every fit, and the LM algebra is batched numpy (``(N, n_p, n_p)`` solves).
This removes the per-fit Python overhead that dominates a one-fit-at-a-time loop. The LM loop
and its convergence test are those of ``methods.press.lsq.lm``, shared with the single fit.
"""

from __future__ import annotations

import numpy as np

from methods.errors import InputError
from methods.press.lsq.core import EPS, CompiledModel
from methods.press.lsq.covariance import COND_MAX
from methods.press.lsq.lm import LMResult, Tolerances, levenberg_marquardt
from methods.press.lsq.problem import LSProblem

# split fits start at the full-data estimate, close to their optimum: a smaller budget
BATCH_TOLERANCES = Tolerances(gtol=1e-8, xtol=1e-8, max_iter=60)


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
    problem: LSProblem,
    *,
    tol: Tolerances = BATCH_TOLERANCES,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The LM of ``methods.press.lsq.lm`` (Gauss-Newton matrix, no fallback) for N problems.

    ``problem.zbar``, ``problem.wt``: (N, n_l). Returns estimates (N, n_p), costs (N,), converged (N,): True
    only where the shared convergence test (``methods.press.lsq.lm.stationarity``) passed, the
    same test as the single fit's ``success``.
    """
    res = solve_ls_batch_result(problem, tol=tol)
    return res.x * problem.scale, res.cost, res.converged


def solve_ls_batch_result(
    problem: LSProblem,
    *,
    tol: Tolerances = BATCH_TOLERANCES,
) -> LMResult:
    """As ``solve_ls_batch``, returning the full ``LMResult`` (scaled x, stop reasons)."""
    if not problem.batched:
        raise InputError("zbar: solve_ls_batch fits N problems (N, n_l); use solve_ls for one")
    comp, q, zbar, scale = problem.comp, problem.q, problem.zbar, problem.scale
    n = zbar.shape[0]
    sw = np.sqrt(problem.wt)
    lo, hi = problem.lower / scale, problem.upper / scale

    def evaluate(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with np.errstate(all="ignore"):
            h, J = eval_hJ_batch(comp, X * scale, q)
            e = EPS * sw * (np.abs(h) + np.abs(zbar))
            return sw * (h - zbar), sw[:, :, None] * J * scale, e

    x0 = np.tile(np.clip(problem.p0 / scale, lo, hi), (n, 1))
    return levenberg_marquardt(evaluate, x0, lo, hi, tol=tol)


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

"""Levenberg-Marquardt for N least-squares problems at once, with one convergence test.

Each problem n minimises ``F(x) = 1/2 ||r(x)||^2`` over scaled parameters ``x`` (``p = x *
scale``) in a box ``lo <= x <= hi``, given an evaluator ``x -> (r, J)`` (weighted residuals
(N, m), Jacobian (N, m, n_p)). The single fit (``core.solve_ls``, N = 1; an unbounded one
after MINPACK's ``lmder``, ``minpack``, whose end point this test judges) and the batched split
fits (``batch.solve_ls_batch``) both run this loop and, above all, the same test:

Convergence test (``stationarity``, its code in ``convergence``), at the point x with Jacobian
J and residual r, on the free parameters F (a parameter at a bound whose descent direction
leaves the box is held):

- column scaling ``D_i = ||J_i||``, ``Jn = J D^-1`` (Jacobian-based scaling, so the test does
  not depend on parameter units or on the size of any one parameter);
- singular: a column with ``D_i = 0`` or non-finite, or ``cond(Jn_F) > COND_JAC_MAX``: the
  minimiser is not isolated (a parameter ran to an asymptote or is not determined), never a
  success;
- gradient (first-order optimality): ``||P_J r|| <= gtol ||r||``, ``P_J`` the orthogonal
  projector on the range of ``J_F``. ``(||P_J r|| / ||r||)^2`` is the relative cost decrease
  a Gauss-Newton step predicts, so this is also the "no decrease left" check; it is
  ``max_i |J_i^T r| / (||J_i|| ||r||)`` (MINPACK's scaled gradient) up to the conditioning.
  A solver that can make no further progress (no descent step at any damping, or the budget
  spent) has converged to working precision (``PRECISION``) when the predicted decrease
  ``1/2 ||P_J r||^2`` is below 10x the rounding error of the cost ``sum_l |r_l| e_l``
  (``e_l = eps (|h_l| + |z_l|)`` weighted): no decrease is measurable in float64 (a very good
  fit of large values). This is only a fallback verdict: as a test it would stop early;
- step: the Gauss-Newton step ``u = -(J_F^T J_F)^-1 J_F^T r`` is below ``xtol`` relative in
  EVERY component: ``|u_i| <= xtol max(|x_i|, s_i, sqrt(eps))`` with ``s_i`` the standard
  error ``sqrt(2F/(m - n_p) [(J^T J)^-1]_ii)`` (a step far below a parameter's uncertainty
  changes nothing; this route certifies zero-residual problems, where ``r`` is rounding noise
  and its angle to ``J`` is meaningless).

Success means: not singular, finite, and (gradient or step, or precision when stuck). A small damped LM step alone
never counts (that was the false convergence of a runaway parameter: heavy damping makes
steps small anywhere).

Solver: LM steps ``(A + lam diag(d)) v = -g`` with ``A = J^T J`` (or ``J^T J + S``, the full
Hessian, after 15 iterations when positive definite and a second-order evaluator is given:
large residuals make Gauss-Newton converge only linearly), Moré's scaling ``d_i = max over
iterations of A_ii`` (Marquardt's current ``A_ii`` lets the damping of a vanishing column
vanish, and the parameter runs away), Nielsen's damping update (``lam *= max(1/3, 1 - (2 rho -
1)^3)`` on success, ``lam *= nu, nu *= 2`` on failure, ``rho`` = actual / predicted
decrease), a trial accepted when the cost does not increase; bounds by projection. The
iteration budget grows by half (up to 4x) while the cost still falls steadily.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from methods.press.lsq.convergence import (  # the test, here re-exported for the solvers
    _CONVERGED,
    _ORDER,
    COND_JAC_MAX,
    ROUNDING_FACTOR,
    SQRT_EPS,
    Stationarity,
    StopReason,
    stationarity,
)

__all__ = [
    "COND_JAC_MAX", "LAM_MAX", "ROUNDING_FACTOR", "SQRT_EPS", "Evaluate", "LMResult",
    "SecondOrder", "Stationarity", "StopReason", "Tolerances", "levenberg_marquardt",
    "stationarity",
]  # fmt: skip

LAM_MAX = 1e16


@dataclass(frozen=True)
class Tolerances:
    """``gtol``: relative Gauss-Newton decrease ``||P_J r|| / ||r||``; ``xtol``: relative
    Gauss-Newton step per component; ``max_iter``: base budget (grows while progress is
    steady, at most ``4 max_iter``); ``second_order_after``: iterations before the full
    Hessian is tried (never, if no second-order evaluator)."""

    gtol: float = 1e-10
    xtol: float = 1e-10
    max_iter: int = 200
    second_order_after: int = 15
    lam0: float = 1e-6  # nearly Gauss-Newton: the press residuals are close to linear in 1/k


@dataclass(frozen=True)
class LMResult:
    """Per problem: ``x`` (N, n_p) scaled estimates, ``cost`` (N,) ``1/2 ||r||^2``,
    ``reasons`` (N,) StopReason, ``n_iter`` (N,), ``test`` the final ``Stationarity``."""

    x: np.ndarray
    cost: np.ndarray
    reasons: tuple[StopReason, ...]
    n_iter: np.ndarray
    test: Stationarity

    @property
    def converged(self) -> np.ndarray:
        # by code, not by a Python loop over the reasons (an Enum compares in Python: ~30 us
        # each, which was a tenth of a small model's batch of split fits)
        codes = np.fromiter(map(_ORDER.index, self.reasons), dtype=int, count=len(self.reasons))
        return _any_of(codes, _CONVERGED)


Evaluate = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
SecondOrder = Callable[[np.ndarray, np.ndarray], np.ndarray]


def levenberg_marquardt(
    evaluate: Evaluate,
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    tol: Tolerances = Tolerances(),
    second_order: SecondOrder | None = None,
) -> LMResult:
    """Run LM (module docstring) from ``x0`` (N, n_p). ``evaluate(X) -> (r (N, m), J (N, m,
    n_p), e (N, m))`` in scaled parameters, ``e`` the rounding level of r (see
    ``stationarity``); ``second_order(X, r) -> S (N, n_p, n_p)`` with ``S =
    sum_l r_l Hess r_l`` (scaled), optional."""
    X = np.clip(np.array(x0, dtype=float), lo, hi)
    n, n_p = X.shape
    R, J, E = evaluate(X)
    cost = 0.5 * np.einsum("nm,nm->n", R, R)
    lam = np.full(n, tol.lam0)
    nu = np.full(n, 2.0)
    test = stationarity(J, R, X, lo, hi, E, gtol=tol.gtol, xtol=tol.xtol)
    code = test.code.copy()
    done = code >= 0
    d = np.zeros((n, n_p))
    n_iter = np.zeros(n, dtype=int)
    budget, window = tol.max_iter, max(tol.max_iter // 4, 5)
    history = [cost.copy()]
    it = 0
    while not done.all():
        if it >= budget:
            # steady progress: the cost still fell by > 1e-8 relative over the last window
            old = history[max(len(history) - window, 0)]
            steady = ~done & (old - cost > 1e-8 * np.maximum(cost, 1e-300))
            if budget < 4 * tol.max_iter and steady.any():
                code[~done & ~steady] = _ORDER.index(StopReason.MAX_ITERATIONS)
                done |= ~steady
                budget += tol.max_iter // 2
            else:
                code[~done] = _ORDER.index(StopReason.MAX_ITERATIONS)
                break
        it += 1
        act = ~done
        n_iter[act] += 1
        use_second = second_order if it > tol.second_order_after else None
        v, g, A, d = _damped_step(J, R, X, d, lam, use_second)
        v[done] = 0.0
        Xn = np.clip(X + v, lo, hi)
        s = Xn - X
        # einsum as before: a matmul rounds differently, and the noise-floor stops of the
        # hardest NIST cases (Bennett5, Lanczos3) follow the rounding
        pred = -(np.einsum("np,np->n", g, s) + 0.5 * np.einsum("np,npq,nq->n", s, A, s))
        Rn, Jnew, En = evaluate(Xn)
        cn = 0.5 * np.einsum("nm,nm->n", Rn, Rn)
        with np.errstate(invalid="ignore", over="ignore"):
            good = np.isfinite(cn) & np.isfinite(Jnew).all(axis=(1, 2))
            acc = act & good & (cn <= cost)
            rho = np.where(pred > 0, (cost - cn) / np.where(pred > 0, pred, 1.0), 0.0)
        every = bool(acc.all())
        X, R, J, E, cost = _accept(acc, every, (X, R, J, E, cost), (Xn, Rn, Jnew, En, cn))
        upd = np.maximum(1.0 / 3.0, 1.0 - (2.0 * np.clip(rho, 0.0, 1.0) - 1.0) ** 3)
        lam = np.where(acc, np.maximum(lam * upd, 1e-15), lam * nu)
        nu = np.where(acc, 2.0, np.minimum(nu * 2.0, 1e6))
        history.append(cost.copy())
        if acc.any():
            on = slice(None) if every else acc  # a view, not a copy, when all were accepted
            t = stationarity(J[on], R[on], X[on], lo, hi, E[on], gtol=tol.gtol, xtol=tol.xtol)
            idx = np.flatnonzero(acc)
            hit = t.code >= 0
            code[idx[hit]] = t.code[hit]
            done[idx[hit]] = True
        stuck = act & ~done & (lam > LAM_MAX)
        code[stuck] = _ORDER.index(StopReason.NO_DESCENT)
        done |= stuck
    final = stationarity(J, R, X, lo, hi, E, gtol=tol.gtol, xtol=tol.xtol)
    reasons = _final_reasons(code, final)
    return LMResult(X, cost, reasons, n_iter, final)


def _accept(
    acc: np.ndarray, every: bool, old: tuple[np.ndarray, ...], new: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, ...]:
    """The current arrays with the accepted trials' rows in place; the trial arrays themselves
    when every trial was accepted (one problem: no masked copies)."""
    if every:
        return new
    for a, b in zip(old, new):
        a[acc] = b[acc]
    return old


def _damped_step(
    J: np.ndarray,
    R: np.ndarray,
    X: np.ndarray,
    d: np.ndarray,
    lam: np.ndarray,
    second_order: SecondOrder | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The LM step ``v`` of every start, with the gradient ``g``, the model Hessian ``A`` (the
    second-order terms added where that keeps it positive definite) and the running maximum
    ``d`` of diag(J^T J) that scales the damping (More's scaling)."""
    JT = J.transpose(0, 2, 1)
    g = (JT @ R[:, :, None])[..., 0]
    A = JT @ J
    d = np.maximum(d, np.diagonal(A, axis1=1, axis2=2))
    dd = np.maximum(d, 1e-300 + 1e-16 * d.max(axis=1, keepdims=True))
    if second_order is not None:
        As = A + second_order(X, R)
        As = 0.5 * (As + As.transpose(0, 2, 1))
        pd = np.linalg.eigvalsh(As)[:, 0] > 1e-12 * np.trace(A, axis1=1, axis2=2)
        A = np.where(pd[:, None, None], As, A)
    Mlam = A + lam[:, None, None] * dd[:, :, None] * np.eye(A.shape[1])
    try:
        v = -np.linalg.solve(Mlam, g[:, :, None])[..., 0]
    except np.linalg.LinAlgError:
        v = -np.stack([np.linalg.lstsq(Mi, gi, rcond=None)[0] for Mi, gi in zip(Mlam, g)])
    return v, g, A, d


def _any_of(code: np.ndarray, values: list[int]) -> np.ndarray:
    """``np.isin`` for a few small codes, without its sorting set-up (~0.2 ms a call)."""
    out = np.zeros(code.shape, dtype=bool)
    for v in values:
        out |= code == v
    return out


def _final_reasons(code: np.ndarray, final: Stationarity) -> tuple[StopReason, ...]:
    """Stop reasons after the loop: a failure at a singular point says so (runaway parameter);
    a stuck solver at a point where no decrease is measurable has converged to working
    precision."""
    code = code.copy()
    fail = ~_any_of(code, [_ORDER.index(StopReason.GRADIENT), _ORDER.index(StopReason.STEP)])
    sing = fail & (final.code == _ORDER.index(StopReason.SINGULAR))
    code[sing] = final.code[sing]
    stuck = [_ORDER.index(StopReason.NO_DESCENT), _ORDER.index(StopReason.MAX_ITERATIONS)]
    stuck_ok = _any_of(code, stuck) & final.at_precision
    code[stuck_ok] = _ORDER.index(StopReason.PRECISION)
    return tuple(_ORDER[c] for c in code)

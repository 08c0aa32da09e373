"""MINPACK's ``lmder`` (Moré 1978, compiled, scipy's) as the first engine of the single fit, with
greylab's exact Jacobian.

Called as scipy's own ``least_squares(method="lm")`` calls it (``scipy.optimize._minpack._lmder``):
``leastsq``'s wrapper around the same call checks the callbacks again, formats its messages
and inverts MINPACK's R factor for a covariance that is not used, about a tenth of a small fit's
MINPACK time. Where that entry point is missing (another scipy), ``leastsq`` runs: the same
routine, the same arguments, the same end point.

MINPACK's own stopping verdict is not trusted: it claims success at runaway points (NIST
BoxBOD from start 1: ``b2`` at an asymptote where its Jacobian column vanishes) and stops at
a few digits with its default tolerances. ``core.solve_ls`` hands its end point to the careful
LM of ``methods.press.lsq.lm``, whose convergence test decides (0 iterations when the point
passes it; otherwise LM continues from there, then the old fallbacks from the start).

The engine works in greylab's scaled parameters and only on unbounded problems (``lmder``
has no bounds; a bounded problem goes to the projected LM directly). Each point is evaluated
once: MINPACK asks for the Jacobian at the point whose residuals it has just computed, so
the last ``(r, J)`` is kept. A non-finite model output is returned as a huge residual
vector, which MINPACK rejects as a trial (a larger sum of squares).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from methods.press.lsq import linalg
from methods.press.lsq.lm import (
    _ORDER,
    ROUNDING_FACTOR,
    Evaluate,
    LMResult,
    SecondOrder,
    Stationarity,
    StopReason,
    Tolerances,
    stationarity,
)

Point = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
HUGE = 1e150  # residual of a non-finite trial: rejected, and squares without overflow
TOL = 1e-15  # run to full precision: the test afterwards decides, never MINPACK's status


@dataclass(frozen=True)
class MinpackResult:
    """``x`` (n_p,) MINPACK's end point (scaled), ``n_iter`` its Jacobian evaluations
    (iterations), ``n_fev`` its residual evaluations, ``info`` its own verdict (1-4: it
    claims convergence; never trusted here)."""

    x: np.ndarray
    n_iter: int
    n_fev: int
    info: int


def minpack_lm(point: Point, x0: np.ndarray, *, max_iter: int) -> MinpackResult | None:
    """``lmder`` from ``x0`` with ``point(x) -> (r (m,), J^T (n_p, m))``, MINPACK's Jacobian
    column scaling (``diag`` from the column norms, as ``x_scale='jac'``), tolerances 1e-15
    and at most ``max_iter`` residual evaluations per parameter. None when MINPACK cannot
    start (non-finite model at ``x0``, fewer residuals than parameters) or raises."""
    x0 = np.asarray(x0, dtype=float)
    with np.errstate(all="ignore"):
        r0, J0 = point(x0)
    if r0.size < x0.size or not (np.isfinite(r0).all() and np.isfinite(J0).all()):
        return None
    # the point MINPACK asked for last: its bytes, r, J^T (MINPACK asks for the Jacobian at
    # the point whose residuals it has just computed)
    key, r_last, Jt_last = x0.tobytes(), r0, J0
    isfinite = math.isfinite

    def fun(x: np.ndarray) -> np.ndarray:
        nonlocal key, r_last, Jt_last
        k = x.tobytes()
        if k != key:
            r, Jt = point(x)
            # two dot products are the fast check (a square that overflows is only a false
            # alarm): the exact check only when they are not finite
            if not isfinite(r.dot(r) + (flat := Jt.ravel()).dot(flat)) and not (
                np.isfinite(r).all() and np.isfinite(Jt).all()
            ):
                r, Jt = np.full_like(r, HUGE), np.zeros_like(Jt)
            key, r_last, Jt_last = k, r, Jt
        return r_last

    def jac(x: np.ndarray) -> np.ndarray:
        if x.tobytes() != key:
            fun(x)
        return Jt_last

    maxfev = max_iter * (x0.size + 1)
    lmder = _compiled_lmder()
    try:
        with np.errstate(all="ignore"):
            if lmder is not None:  # full output, Jacobian by columns, factor 100, no diag
                x, info, status = lmder(fun, jac, x0.copy(), (), 1, 1, TOL, TOL, TOL, maxfev,
                                        100.0, None)  # fmt: skip
            else:
                from scipy.optimize import leastsq  # on use (a model product stays light)

                with warnings.catch_warnings():  # its verdict's warnings: never trusted here
                    warnings.simplefilter("ignore")
                    x, _, info, _, status = leastsq(
                        fun, x0, Dfun=jac, full_output=True, col_deriv=True,
                        xtol=TOL, ftol=TOL, gtol=TOL, maxfev=maxfev,
                    )  # fmt: skip
    except (ValueError, TypeError, np.linalg.LinAlgError):
        return None
    x = np.asarray(x, dtype=float)
    if not np.isfinite(x).all():
        return None
    return MinpackResult(x, int(info.get("njev", info["nfev"])), int(info["nfev"]), int(status))


def _compiled_lmder() -> Callable | None:
    """scipy's compiled ``lmder`` entry point (``fcn, Dfun, x0, args, full_output, col_deriv,
    ftol, xtol, gtol, maxfev, factor, diag``; what ``leastsq`` and ``least_squares`` call), or
    None when this scipy has none; looked up once (imported on first use: a model product that
    never fits stays light)."""
    if not _LMDER:
        try:
            from scipy.optimize._minpack import _lmder
        except ImportError:
            _lmder = None
        _LMDER.append(_lmder if callable(_lmder) else None)
    return _LMDER[0]


_LMDER: list[Callable | None] = []  # the lookup's answer, once made


@dataclass(frozen=True)
class Polished:
    """``x`` (n_p,) the polished point, ``cost`` there, ``test`` the convergence test there
    (N = 1), ``n_iter`` the Newton steps taken."""

    x: np.ndarray
    cost: float
    test: Stationarity
    n_iter: int


def minpack_first(
    point: Point,
    evaluate: Evaluate,
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    tol: Tolerances,
    second_order: SecondOrder | None = None,
) -> LMResult | None:
    """MINPACK from ``x0`` (n_p,), then ``newton_polish``: an ``LMResult`` (N = 1) whose
    reason is the test's verdict at the polished point (GRADIENT or STEP: converged; else
    MAX_ITERATIONS, or SINGULAR / NOT_FINITE as the test found: the caller's careful LM
    continues), ``n_iter`` MINPACK's iterations plus the Newton steps. None when MINPACK
    cannot run (see ``minpack_lm``)."""
    mp = minpack_lm(point, x0, max_iter=tol.max_iter)
    if mp is None:
        return None
    pol = newton_polish(evaluate, mp.x, lo, hi, tol=tol, second_order=second_order)
    code = int(pol.test.code[0])
    reason = _ORDER[code] if code >= 0 else StopReason.MAX_ITERATIONS
    return LMResult(
        pol.x[None], np.array([pol.cost]), (reason,), np.array([mp.n_iter + pol.n_iter]),
        pol.test,
    )  # fmt: skip


def newton_polish(
    evaluate: Evaluate,
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    tol: Tolerances,
    second_order: SecondOrder | None = None,
    max_steps: int = 8,
) -> Polished:
    """Newton steps on the gradient from MINPACK's end point while the test does not pass.

    MINPACK stops when the relative decrease of the cost falls below 1e-15, i.e. at
    ``||P_J r|| / ||r|| ~ 3e-8``, where cost differences are rounding noise; the test asks for
    1e-10. The step solves ``(J^T J + S) u = -J^T r`` (the full Hessian, when ``second_order``
    is given and it is positive definite: quadratic convergence also for large residuals,
    where Gauss-Newton contracts only linearly), else it is the Gauss-Newton step of the
    test. A step is kept only while the cost does not rise above its rounding level and
    ``||P_J r|| / ||r||`` falls (or the test passes); the test at the end decides."""
    X = x[None]
    R, J, E = evaluate(X)
    free = bool((lo == -np.inf).all() and (hi == np.inf).all())  # no parameter can be held
    test = stationarity(J, R, X, lo, hi, E, gtol=tol.gtol, xtol=tol.xtol, unbounded=free)
    with np.errstate(all="ignore"):
        cost = 0.5 * float(R[0] @ R[0])
    n = 0
    while test.code[0] < 0 and n < max_steps:
        u = _newton_step(J[0], R[0], second_order(X, R)[0]) if second_order else None
        Xn = np.clip(X + (test.gn_step if u is None else u[None]), lo, hi)
        Rn, Jn, En = evaluate(Xn)
        with np.errstate(all="ignore"):  # a far trial overflows: it is refused, not warned
            cn = 0.5 * float(Rn[0] @ Rn[0])
            noise = ROUNDING_FACTOR * float(np.abs(R[0]) @ E[0])
        if not (np.isfinite(cn) and np.isfinite(Jn).all()) or cn > cost + noise:
            break
        tn = stationarity(Jn, Rn, Xn, lo, hi, En, gtol=tol.gtol, xtol=tol.xtol, unbounded=free)
        n += 1
        if not (tn.converged[0] or tn.optimality[0] < test.optimality[0]):
            break  # no progress: keep the point before
        X, R, J, E, cost, test = Xn, Rn, Jn, En, cn, tn
    return Polished(X[0], cost, test, n)


def _newton_step(J: np.ndarray, r: np.ndarray, S: np.ndarray) -> np.ndarray | None:
    """``-(J^T J + S)^-1 J^T r`` in column-scaled form, None if that matrix is not positive
    definite (or not finite)."""
    D = np.sqrt(np.einsum("mp,mp->p", J, J))
    if not (np.all(D > 0) and np.isfinite(S).all()):
        return None
    Jn = J / D
    H = Jn.T @ Jn + S / np.outer(D, D)
    try:
        L = linalg.cholesky(0.5 * (H + H.T))
    except np.linalg.LinAlgError:
        return None
    g = Jn.T @ r
    return -linalg.solve(L.T, linalg.solve(L, g)) / D

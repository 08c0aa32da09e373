"""One problem's model evaluations for the single fit (``core.solve_ls``): the residual
evaluator of the careful LM and the Newton steps, MINPACK's point function, and the raw model
output the evaluator has just computed.

Each evaluation is ``comp.eval_hJ(x * scale, q)`` (the raw ``h``, ``J``) and arithmetic on it;
the same point gives the same raw output, so a kept output has the bits a new evaluation would
have. The evaluator keeps its last two (``recent``): the estimate is one of them after the
Newton steps (the last point, or the one before a refused step), and the fit's covariance needs
``h`` and ``J`` there (``estimation.fit_parameters``). MINPACK's own last evaluation is not
kept: it is at MINPACK's end point in only 2 of the 54 NIST fits (MINPACK usually stops after
refusing a trial), and copying its output at every accepted point costs what it would save.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from methods.press.lsq.problem import LSProblem

EPS = float(np.finfo(float).eps)

Raw = tuple[np.ndarray, np.ndarray]  # h (n_l,), J (n_l, n_p): what comp.eval_hJ returns
Triple = tuple[np.ndarray, np.ndarray, np.ndarray]  # r (1, m), J (1, m, n_p), e (1, m)


def residual_fns(
    problem: LSProblem,
) -> tuple[
    Callable[[np.ndarray], Triple],
    Callable[..., np.ndarray],
    Callable[[np.ndarray], Raw | None],
]:
    """Weighted residuals ``r = sqrt(wt) (h(x scale) - zbar)``, scaled Jacobian and rounding
    level for one problem, in the (N = 1) batch layout of ``methods.press.lsq.lm``:
    ``evaluate(X)``; ``second(X, R)`` ``S`` scaled; ``recent(x)`` the raw output
    ``comp.eval_hJ(x * scale, q)`` when ``x`` (n_p,) was one of the last two points evaluated,
    else None."""
    comp, q, zbar, scale = problem.comp, problem.q, problem.zbar, problem.scale
    sw = np.sqrt(problem.wt)
    abs_z, scale2 = np.abs(zbar), np.outer(scale, scale)
    unit = bool((sw == 1.0).all())
    kept: list[tuple[bytes, Raw]] = []

    def evaluate(X: np.ndarray) -> Triple:
        with np.errstate(all="ignore"):
            h, J = raw = comp.eval_hJ(X[0] * scale, q)
            kept[:] = [(X[0].tobytes(), raw), *kept[:1]]
            if unit:  # the products with sw = 1 (and EPS * 1) left out, the same bits
                e = EPS * (np.abs(h) + abs_z)
                return (h - zbar)[None], (J * scale)[None], e[None]
            e = EPS * sw * (np.abs(h) + abs_z)
            return (sw * (h - zbar))[None], ((sw[:, None] * J) * scale)[None], e[None]

    def recent(x: np.ndarray) -> Raw | None:
        key = x.tobytes()
        return next((raw for k, raw in kept if k == key), None)

    def second(X: np.ndarray, R: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            S = comp.eval_S(X[0] * scale, q, sw * R[0])
        return (S * scale2)[None]

    return evaluate, second, recent


def _residual_fns(
    problem: LSProblem,
) -> tuple[Callable[[np.ndarray], Triple], Callable[..., np.ndarray]]:
    """``evaluate`` and ``second`` of ``residual_fns``."""
    evaluate, second, _ = residual_fns(problem)
    return evaluate, second


def _point_fn(problem: LSProblem) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``x -> (r (m,), J^T (n_p, m))`` of one problem in scaled parameters, unbatched, for
    MINPACK (the Jacobian by columns: no transposition there). Straight from the evaluation
    buffers of the thread that makes it (bound once: MINPACK calls it thousands of times), so
    it is called on that thread (``core.solve_ls`` makes it for its MINPACK run); no copies;
    the caller holds ``np.errstate``."""
    q, zbar, scale = problem.q, problem.zbar, problem.scale
    sw = np.sqrt(problem.wt)
    swT = scale[:, None] * sw[None, :]
    b = problem.comp._buffers()
    p_in, q_in, h_out, Jt_out, ev1, multiply = b.p, b.q, b.h, b.Jt, b.ev1, np.multiply

    def point(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        multiply(x, scale, out=p_in)
        q_in[:] = q
        ev1()
        return sw * (h_out - zbar), Jt_out * swT

    def point_unit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        multiply(x, scale, out=p_in)
        q_in[:] = q
        ev1()
        return h_out - zbar, Jt_out * swT

    # unit weights (every residual once, sigma 1): 1 * r is r, bit for bit, without the product
    return point_unit if bool((sw == 1.0).all()) else point

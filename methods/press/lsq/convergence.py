"""The convergence test shared by every least-squares solver of the press fits
(``methods.press.lsq.lm``, where it is described, ``minpack``, ``batch``): ``stationarity``.

One implementation of the test for N problems at once (``_stationarity``) and the same
arithmetic for one problem (N = 1: the single fit's Newton steps and LM), in fewer numpy calls:
every operation the batched form does on the one problem's row, in the same order (the same
BLAS and LAPACK routines, the same reductions), so the verdicts and values are the same bit
for bit (``tests/methods/press/test_fast_paths.py`` compares the two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from methods.press.lsq import linalg

COND_JAC_MAX = 1e10  # cond(Jn) above this: the column directions are numerically dependent
# The Gram matrix's eigenvalues give cond(Jn) = sqrt(w_max / w_min) only while w_min is
# resolved (relative error eps * cond^2): above this the condition is taken from Jn's own
# singular values (resolved to cond ~ 1/eps), so the SINGULAR verdict at COND_JAC_MAX does
# not depend on how a platform's LAPACK rounds an eigenvalue at 1e-16 (+2e-17 or -2e-16)
COND_GRAM_RESOLVED = 1e6
SQRT_EPS = float(np.sqrt(np.finfo(float).eps))
ROUNDING_FACTOR = 10.0  # margin on the first-order rounding error of the cost


class StopReason(StrEnum):
    """Why the solver stopped; ``GRADIENT`` and ``STEP`` are the converged ones."""

    GRADIENT = "gradient"
    STEP = "step"
    PRECISION = "precision"
    MAX_ITERATIONS = "max_iterations"
    NO_DESCENT = "no_descent"
    SINGULAR = "singular"
    NOT_FINITE = "not_finite"

    @property
    def converged(self) -> bool:
        return self in (StopReason.GRADIENT, StopReason.STEP, StopReason.PRECISION)

    @property
    def text(self) -> str:
        return _TEXT[self]


_TEXT = {
    StopReason.GRADIENT: "converged (first-order optimality: the Gauss-Newton model predicts"
    " no further relative decrease)",
    StopReason.STEP: "converged (Gauss-Newton step below tolerance in every parameter)",
    StopReason.PRECISION: "converged to working precision (no descent step left and the"
    " Gauss-Newton predicted decrease is below the rounding error of the cost)",
    StopReason.MAX_ITERATIONS: "not converged: iteration budget exhausted before the"
    " optimality test passed",
    StopReason.NO_DESCENT: "not converged: no descent step found at a point that is not stationary",
    StopReason.SINGULAR: "not converged: Jacobian rank-deficient at the final point (a"
    " parameter ran to an asymptote or is not determined by the data)",
    StopReason.NOT_FINITE: "not converged: the model returned non-finite values",
}
_ORDER = list(StopReason)
_CONVERGED = [_ORDER.index(r) for r in (StopReason.GRADIENT, StopReason.STEP, StopReason.PRECISION)]


@dataclass(frozen=True)
class Stationarity:
    """Per problem (N,): ``optimality`` ``||P_J r|| / ||r||``; ``step`` max_i of
    ``|u_i| / (xtol-floor_i)`` / xtol (<= 1 passes); ``condition`` cond(Jn_F); ``code``:
    index into StopReason of GRADIENT, STEP, SINGULAR, NOT_FINITE, or -1 (none passed);
    ``at_precision``: the predicted decrease is below the cost's rounding error (used only
    when the solver can make no further progress: then PRECISION); ``gn_step`` (N, n_p) the
    Gauss-Newton step ``u`` of the step test (free parameters; 0 for held ones)."""

    optimality: np.ndarray
    step: np.ndarray
    condition: np.ndarray
    code: np.ndarray
    at_precision: np.ndarray
    gn_step: np.ndarray

    @property
    def converged(self) -> np.ndarray:
        return (self.code == _ORDER.index(StopReason.GRADIENT)) | (
            self.code == _ORDER.index(StopReason.STEP)
        )


def stationarity(
    J: np.ndarray,
    r: np.ndarray,
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    noise: np.ndarray | None = None,
    *,
    gtol: float = 1e-10,  # lm.Tolerances' defaults
    xtol: float = 1e-10,
    unbounded: bool = False,
) -> Stationarity:
    """The convergence test of the module docstring for J (N, m, n_p), r (N, m), x (N, n_p);
    ``lo``/``hi`` (n_p,) the scaled box; ``noise`` (N, m) the rounding level of each residual
    (``eps (|sqrt(w) h| + |sqrt(w) z|)``), optional. The one implementation used by every
    solver here. ``unbounded``: the caller's word that ``lo`` is -inf and ``hi`` +inf
    everywhere (the single fit then skips the held-parameter masks at a finite point)."""
    with np.errstate(all="ignore"):  # runaway points overflow: they are flagged, not warned
        if J.shape[0] == 1:  # the single fit: the same arithmetic in fewer numpy calls
            return _stationarity_one(J[0], r[0], x[0], lo, hi, noise, gtol, xtol, unbounded)
        return _stationarity(J, r, x, lo, hi, noise, gtol, xtol)


def _stationarity(
    J: np.ndarray,
    r: np.ndarray,
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    noise: np.ndarray | None,
    gtol: float,
    xtol: float,
) -> Stationarity:
    n, m, n_p = J.shape
    finite = np.isfinite(r).all(axis=1) & np.isfinite(J).all(axis=(1, 2))
    if not finite.all():
        J = np.where(finite[:, None, None], J, 0.0)
        r = np.where(finite[:, None], r, 0.0)
    # few, batched operations (matmul, not multi-operand einsum): this runs after every
    # accepted step, and on small problems its cost is the count of numpy calls
    JT = J.transpose(0, 2, 1)
    g = (JT @ r[:, :, None])[:, :, 0]  # gradient of 1/2 ||r||^2
    held = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))  # descent leaves the box: KKT ok
    D = np.sqrt((J * J).sum(axis=1))  # column norms ||J_i||
    Ds = np.where(D > 0, D, 1.0)
    Jn = J / Ds[:, None, :]
    any_held = bool(held.any())
    if any_held:  # held columns out of Jn: identity rows and columns in G
        Jn = Jn * ~held[:, None, :]
        G = Jn.transpose(0, 2, 1) @ Jn + held[:, :, None] * np.eye(n_p)
    else:
        G = Jn.transpose(0, 2, 1) @ Jn
    w, V = np.linalg.eigh(G)
    cond = np.where(w[:, 0] > 0, w[:, -1] / np.maximum(w[:, 0], 1e-300), np.inf)
    cond = np.sqrt(np.maximum(cond, 1.0))  # of Jn, not of the Gram matrix
    unresolved = ~(cond <= COND_GRAM_RESOLVED)
    if unresolved.any():
        for i in np.flatnonzero(unresolved & finite):
            cond[i] = _svd_condition(Jn[i], held[i] if any_held else None)
    # without a held parameter the masks select everything (the same values, fewer arrays)
    dead = ((D <= 0) & ~held) if any_held else (D <= 0)
    singular = dead.any(axis=1) | ~(cond <= COND_JAC_MAX)
    gn = np.where(held, 0.0, g / Ds) if any_held else g / Ds
    c = (gn[:, None, :] @ V)[:, 0, :]  # V^T gn
    wi = 1.0 / np.maximum(w, 1e-300)
    rr = (r * r).sum(axis=1)
    cw = c * wi
    pr2 = (c * cw).sum(axis=1)  # ||P_J r||^2 = gn^T G^-1 gn
    # (inside ``stationarity``'s errstate: 0/0 where r = 0 is masked, not warned)
    opt = np.where(rr > 0, np.sqrt(np.maximum(pr2, 0.0) / rr), 0.0)
    # predicted decrease 1/2 ||P_J r||^2 below the rounding error of the cost itself
    # (sum_l |r_l| e_l, first order): no decrease can be measured, optimal to working
    # precision (MINPACK's "no further reduction possible", here a tested success)
    if noise is None:
        floor_ok = np.zeros(n, dtype=bool)
    else:
        noise = noise if finite.all() else np.where(finite[:, None], noise, 0.0)
        d_cost = (np.abs(r) * noise).sum(axis=1)
        floor_ok = 0.5 * pr2 <= ROUNDING_FACTOR * d_cost
    u = -(V @ cw[:, :, None])[:, :, 0] / Ds  # Gauss-Newton step in x
    Ginv_diag = ((V * V) @ wi[:, :, None])[:, :, 0] / Ds**2
    s = np.sqrt(np.maximum(rr / max(m - n_p, 1), 0.0)[:, None] * Ginv_diag)
    floor = np.maximum(np.maximum(np.abs(x), s), SQRT_EPS)
    if any_held:
        u = np.where(held, 0.0, u)
    step = np.max(np.abs(u) / floor, axis=1) / xtol
    code = np.full(n, -1)
    code[step <= 1.0] = _ORDER.index(StopReason.STEP)
    code[opt <= gtol] = _ORDER.index(StopReason.GRADIENT)
    code[singular] = _ORDER.index(StopReason.SINGULAR)
    code[~finite] = _ORDER.index(StopReason.NOT_FINITE)
    return Stationarity(opt, step, cond, code, floor_ok & ~singular & finite, u)


_STEP, _GRADIENT = _ORDER.index(StopReason.STEP), _ORDER.index(StopReason.GRADIENT)
_SINGULAR, _NOT_FINITE = _ORDER.index(StopReason.SINGULAR), _ORDER.index(StopReason.NOT_FINITE)


def _stationarity_one(
    J: np.ndarray,
    r: np.ndarray,
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    noise: np.ndarray | None,
    gtol: float,
    xtol: float,
    unbounded: bool = False,
) -> Stationarity:
    """``_stationarity`` for one problem, J (m, n_p), r (m,), x (n_p,), ``noise`` (1, m): line
    by line its operations on the one row (2-D and 1-D arrays, the per-problem scalars as
    Python floats, whose arithmetic is the same IEEE arithmetic), the result with N = 1.
    ``unbounded``: ``lo`` is -inf and ``hi`` +inf everywhere (the caller's word), so that no
    parameter at a finite ``x`` is held."""
    m, n_p = J.shape
    J, r, JJ, rr, finite = _finite_squares(J, r)
    g = J.T @ r  # gradient of 1/2 ||r||^2
    held: Any = None
    if unbounded and math.isfinite(float(x.sum())):  # x <= -inf, x >= inf: nowhere
        any_held = False
    else:
        held = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))  # descent leaves the box: KKT ok
        any_held = bool(held.any())
    D = np.sqrt(JJ)  # column norms ||J_i||
    live = float(D.min()) > 0  # no dead column: np.where(D > 0, D, 1.0) has D's values
    Ds = D if live else np.where(D > 0, D, 1.0)
    Jn = J / Ds
    if any_held:  # held columns out of Jn: identity rows and columns in G
        Jn = Jn * ~held
        G = Jn.T @ Jn + held[:, None] * np.eye(n_p)
    else:
        G = Jn.T @ Jn
    w, V = linalg.eigh(G)
    w0, w1 = float(w[0]), float(w[-1])
    cond = w1 / (w0 if w0 > 1e-300 else 1e-300) if w0 > 0 else math.inf
    if not cond != cond:  # np.sqrt(np.maximum(cond, 1.0)): NaN stays NaN
        cond = math.sqrt(cond) if cond > 1.0 else 1.0
    if not cond <= COND_GRAM_RESOLVED and finite:
        cond = _svd_condition(Jn, held if any_held else None)
    if live:
        singular = not cond <= COND_JAC_MAX
    else:
        dead = ((D <= 0) & ~held) if any_held else (D <= 0)
        singular = bool(dead.any()) or not cond <= COND_JAC_MAX
    gn = np.where(held, 0.0, g / Ds) if any_held else g / Ds
    c = gn @ V  # V^T gn
    wi = 1.0 / np.maximum(w, 1e-300)
    cw = c * wi
    pr2 = float((c * cw).sum())  # ||P_J r||^2 = gn^T G^-1 gn
    opt = math.sqrt(_max0(pr2) / rr) if rr > 0 else 0.0
    if noise is None:
        floor_ok = False
    else:
        e = noise[0] if finite else np.zeros(m)
        floor_ok = 0.5 * pr2 <= ROUNDING_FACTOR * float((np.abs(r) * e).sum())
    u = -(V @ cw) / Ds  # Gauss-Newton step in x
    Ginv_diag = ((V * V) @ wi) / Ds**2
    s = np.sqrt(_max0(rr / max(m - n_p, 1)) * Ginv_diag)
    floor = np.maximum(np.maximum(np.abs(x), s), SQRT_EPS)
    if any_held:
        u = np.where(held, 0.0, u)
    step = float((np.abs(u) / floor).max()) / xtol
    code = -1
    if step <= 1.0:
        code = _STEP
    if opt <= gtol:
        code = _GRADIENT
    if singular:
        code = _SINGULAR
    if not finite:
        code = _NOT_FINITE
    return Stationarity(
        np.array([opt]), np.array([step]), np.array([cond]), np.array([code]),
        np.array([floor_ok and not singular and finite]), u[None],
    )  # fmt: skip


def _finite_squares(
    J: np.ndarray, r: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, bool]:
    """``J``, ``r`` (zeros where either is not finite), the squared column norms of J, ``r^T
    r`` and whether both were finite. The two sums of squares are finite only when every
    element is (NaN and inf square to NaN and inf); the element-wise test only when they are
    not (a square that overflows is no proof)."""
    JJ = (J * J).sum(axis=0)
    rr = float((r * r).sum())
    if math.isfinite(rr + float(JJ.sum())) or (
        bool(np.isfinite(r).all()) and bool(np.isfinite(J).all())
    ):
        return J, r, JJ, rr, True
    J, r = np.zeros_like(J), np.zeros_like(r)
    return J, r, (J * J).sum(axis=0), float((r * r).sum()), False


def _svd_condition(Jn: np.ndarray, held: np.ndarray | None) -> float:
    """cond of the column-scaled Jacobian ``Jn`` (m, n_p) from its singular values, a held
    column counted as a unit column of its own (the Gram matrix's identity row and column);
    ``inf`` when the smallest is 0. For the conditions the Gram matrix cannot resolve
    (``COND_GRAM_RESOLVED``): accurate up to ~1/eps, where the Gram route is up to ~1e8."""
    if held is not None:
        Jn = np.vstack([Jn, np.diag(held.astype(float))])
    sv = np.linalg.svd(Jn, compute_uv=False)
    return float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf


def _max0(v: float) -> float:
    """``np.maximum(v, 0.0)`` of one float: NaN stays NaN, -0.0 becomes 0.0."""
    return v if v > 0.0 or v != v else 0.0

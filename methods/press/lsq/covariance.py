"""Covariance of least-squares estimates: first order ``C1`` and Bard's second order ``C``.

With ``M = J^T Omega J`` (Gauss-Newton information, residuals already divided by sigma),
``S = sum_l omega_l r_l Hess_p r_l`` and ``A = M + S``:

    C1 = M^-1,      C = A^-1 M A^-1          (implicit-function theorem on J^T Omega r = 0)

Conditioning is judged on the scaled information ``D M D`` (``D = diag(scale)``), so that the
threshold ``cond > 1e12`` does not depend on parameter units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from methods.press.lsq import linalg

COND_MAX = 1e12


@dataclass(frozen=True)
class CovarianceResult:
    """``C``, ``C1`` (n_p, n_p); ``M``, ``S`` (n_p, n_p); ``condition`` of the scaled M;
    ``rank``; ``identifiable`` (rank n_p and cond <= 1e12); ``second_order_used`` (False when
    A is not positive definite or the information is singular); ``warnings``."""

    C: np.ndarray
    C1: np.ndarray
    M: np.ndarray
    S: np.ndarray
    condition: float
    rank: int
    identifiable: bool
    second_order_used: bool
    warnings: tuple[str, ...]


def _sym(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + a.T)


def information_condition(M: np.ndarray, scale: np.ndarray) -> tuple[float, int, np.ndarray]:
    """Condition number, numerical rank and eigenvalues of the scaled information."""
    Ms = _sym(M * (scale[:, None] * scale))  # np.outer's product
    ev = linalg.eigvalsh(Ms)
    top = max(float(ev[-1]), 0.0)
    rank = int((ev > top * 1e-12).sum()) if top > 0 else 0
    cond = float(top / ev[0]) if ev[0] > 0 else np.inf
    return cond, rank, ev


def bard_covariance(M: np.ndarray, S: np.ndarray, scale: np.ndarray) -> CovarianceResult:
    """``C`` and ``C1`` from the information ``M`` and the second-order term ``S``."""
    n = M.shape[0]
    cond, rank, _ = information_condition(M, scale)
    warnings: list[str] = []
    if rank < n or not math.isfinite(cond) or cond > COND_MAX:
        inf = np.full((n, n), np.inf)
        warnings.append(
            f"information matrix singular or near-singular (rank {rank} of {n}, cond {cond:.3g}):"
            " parameters not identifiable, covariance unbounded"
        )
        return CovarianceResult(inf, inf.copy(), M, S, cond, rank, False, False, tuple(warnings))
    D = np.diag(scale)
    Ms = _sym(D @ M @ D)
    As = _sym(D @ (M + S) @ D)
    C1 = _sym(D @ linalg.inv(Ms) @ D)
    if linalg.eigvalsh(As)[0] <= 0:
        warnings.append("A = J^T Omega J + S not positive definite: C falls back to C1")
        return CovarianceResult(C1, C1.copy(), M, S, cond, rank, True, False, tuple(warnings))
    Ai = linalg.inv(As)
    C = _sym(D @ Ai @ Ms @ Ai @ D)
    return CovarianceResult(C, C1, M, S, cond, rank, True, True, tuple(warnings))

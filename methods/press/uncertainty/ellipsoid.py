"""Confidence ellipsoids ``G = {p : (p - c)^T C^-1 (p - c) <= chi2_{n_p}(level)}``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from methods.errors import InputError


@dataclass(frozen=True)
class Ellipsoid:
    """Fields: ``center`` (n_p,), ``covariance`` (n_p, n_p), ``level`` (coverage 1 - alpha),
    ``quantile`` = chi2_{n_p}(level), ``semi_axes`` (n_p,) = sqrt(quantile * eigenvalues),
    ascending, ``axes`` (n_p, n_p) unit eigenvectors as columns, ``names``."""

    center: np.ndarray
    covariance: np.ndarray
    level: float
    quantile: float
    semi_axes: np.ndarray
    axes: np.ndarray
    names: tuple[str, ...] = field(default=())

    @classmethod
    def from_covariance(
        cls, center, covariance, level: float = 0.95, names: tuple[str, ...] = ()
    ) -> Ellipsoid:
        if not 0.0 < level < 1.0:
            raise InputError(f"level must lie in (0, 1), got {level}")
        c = np.asarray(center, dtype=float)
        C = np.asarray(covariance, dtype=float)
        if not np.all(np.isfinite(C)):
            raise InputError("covariance is not finite (unidentifiable parameters): no ellipsoid")
        ev, vec = np.linalg.eigh(0.5 * (C + C.T))
        if ev[0] <= 0:
            raise InputError("covariance is not positive definite: no ellipsoid")
        from scipy import stats  # imported on use: a loaded model product stays light

        q = float(stats.chi2.ppf(level, c.size))
        return cls(c, C, float(level), q, np.sqrt(q * ev), vec, tuple(names))

    def mahalanobis2(self, p) -> float:
        d = np.asarray(p, dtype=float) - self.center
        return float(d @ np.linalg.solve(self.covariance, d))

    def contains(self, p) -> bool:
        return self.mahalanobis2(p) <= self.quantile

    def boundary_2d(self, i: int, j: int, n: int = 200) -> np.ndarray:
        """Boundary of the projection onto parameters ``(i, j)``, shape (n, 2).

        The projection of the ellipsoid is ``{x : x^T C_ij^-1 x <= quantile}`` with ``C_ij``
        the 2x2 marginal block, so the boundary is ``c_ij + sqrt(quantile) L (cos t, sin t)``
        with ``L L^T = C_ij``.
        """
        sub = self.covariance[np.ix_([i, j], [i, j])]
        L = np.linalg.cholesky(sub)
        t = np.linspace(0.0, 2.0 * np.pi, n)
        circle = np.vstack([np.cos(t), np.sin(t)])
        return (self.center[[i, j], None] + np.sqrt(self.quantile) * L @ circle).T

    def to_dict(self) -> dict:
        return {
            "names": list(self.names),
            "center": self.center.tolist(),
            "covariance": self.covariance.tolist(),
            "level": self.level,
            "quantile": self.quantile,
            "semi_axes": self.semi_axes.tolist(),
            "axes": self.axes.tolist(),
        }

"""Bard's second-order covariance ``C = A^-1 M A^-1`` and its fallback to ``C1 = M^-1`` when
``A = J^T Omega J + S`` is not positive definite (methods/press/lsq/covariance.py).

Oracle: one-parameter models ``y_j = g(p, x_j)`` (``x_j = q_j / 1000``) whose derivatives are
known by hand (``y = p^2 x``: ``J = 2 p x``, ``H = 2 x``; ``y = exp(p x)``: ``J = x e^{px}``,
``H = x^2 e^{px}``), so with residuals ``r_ij = y_j - z_ij`` and weight ``1 / sigma^2`` per
observation

    M = sum_ij J_j^2 / sigma^2,   S = sum_ij r_ij H_j / sigma^2,   A = M + S.

At an interior minimum A >= 0, so the indefinite case holds the fit at a bound: data
``z = 10 x`` pull p towards sqrt(10) but the upper bound is 1, where ``r = -9 x`` and
``A = sum 4 x^2 - 18 x^2 < 0``. Tolerances: the oracle evaluates M and S at the fit's own
estimate, so only rounding separates them (sums of ~12 terms of order 1..1e2, a 1x1 inverse):
``rtol = 1e-10`` for C1, ``1e-8`` for C (A^-2, with |A| down to ~M/2, amplifies rounding).
"""

from __future__ import annotations

from typing import ClassVar

import casadi as ca
import numpy as np

from methods.press.lsq.estimation import fit_parameters
from tests.methods.press.helpers import table_from

Q = np.array([250.0, 500.0, 750.0, 1000.0])
X = Q / 1000.0
SIGMA = 0.5
N_M = 3


class Square:
    """``y_j = p^2 q_j / 1000``, one sensor; ``p`` bounded to [0.5, 1]."""

    name = "square"
    sensors = ("y",)
    parameters: ClassVar[dict] = {"p": 0.75}
    bounds: ClassVar[dict] = {"p": (0.5, 1.0)}

    def response(self, p, forces):
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            return p[0] ** 2 * forces / 1000.0
        return (p[0] ** 2 * np.asarray(forces, float) / 1000.0)[:, None]


class Exp:
    """``y_j = exp(p q_j / 1000)``, one sensor; at an interior minimum S != 0 in general (H is
    not proportional to J, unlike ``p^2 x`` where ``sum r x = 0`` there makes S vanish)."""

    name = "exp"
    sensors = ("y",)
    parameters: ClassVar[dict] = {"p": 0.8}
    bounds: ClassVar[dict] = {"p": (0.0, 3.0)}

    def response(self, p, forces):
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            return ca.exp(p[0] * forces / 1000.0)
        return np.exp(p[0] * np.asarray(forces, float) / 1000.0)[:, None]


def _hand(y: np.ndarray, J: np.ndarray, H: np.ndarray, z: np.ndarray) -> tuple[float, float]:
    """M and S of the oracle from model values/derivatives (n_q,) and data z (N_M, n_q)."""
    M = z.shape[0] * float(np.sum(J**2)) / SIGMA**2
    S = float(np.sum((y[None, :] - z) * H[None, :])) / SIGMA**2
    return M, S


def _fit(model, z: np.ndarray):
    table = table_from(z[:, :, None], Q, model.sensors)
    return fit_parameters(model, table, sigma={"y": SIGMA})


def test_indefinite_A_falls_back_to_first_order():
    z = np.tile(10.0 * X, (N_M, 1))
    fit = _fit(Square(), z)
    p = fit.parameters["p"]
    assert p == 1.0  # held at the upper bound
    M, S = _hand(p**2 * X, 2 * p * X, 2 * X, z)
    assert M + S < 0  # A negative: by hand M = 90, S = -405 (3 series, sigma 0.5)
    np.testing.assert_allclose(fit.covariance_first_order, [[1.0 / M]], rtol=1e-10)
    np.testing.assert_array_equal(fit.covariance, fit.covariance_first_order)
    assert any("not positive definite" in w and "falls back to C1" in w for w in fit.warnings)


def test_positive_definite_A_uses_the_second_order_covariance():
    rng = np.random.default_rng(3)
    z = np.exp(X)[None, :] + rng.normal(0.0, SIGMA, size=(N_M, X.size))  # true p = 1
    fit = _fit(Exp(), z)
    p = fit.parameters["p"]
    assert 0.0 < p < 3.0  # interior minimum
    y = np.exp(p * X)
    M, S = _hand(y, X * y, X**2 * y, z)
    assert M + S > 0 and abs(S) > 1e-3 * M  # second-order term not negligible
    np.testing.assert_allclose(fit.covariance_first_order, [[1.0 / M]], rtol=1e-10)
    np.testing.assert_allclose(fit.covariance, [[M / (M + S) ** 2]], rtol=1e-8)
    assert abs(fit.covariance[0, 0] / fit.covariance_first_order[0, 0] - 1) > 1e-3
    assert not any("not positive definite" in w for w in fit.warnings)

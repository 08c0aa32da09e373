from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from methods import Ellipsoid, InputError


def test_ellipsoid_geometry() -> None:
    C = np.array([[4.0, 1.2], [1.2, 1.0]])
    e = Ellipsoid.from_covariance([1.0, 2.0], C, level=0.9)
    assert e.quantile == pytest.approx(stats.chi2.ppf(0.9, 2))
    np.testing.assert_allclose(e.semi_axes**2 / e.quantile, np.linalg.eigvalsh(C))
    # boundary points of a 2-parameter ellipsoid lie exactly on it
    pts = e.boundary_2d(0, 1, n=50)
    m2 = [e.mahalanobis2(p) for p in pts]
    np.testing.assert_allclose(m2, e.quantile, rtol=1e-10)
    assert e.contains(e.center) and not e.contains(e.center + 10 * e.semi_axes[-1] * e.axes[:, -1])
    assert e.to_dict()["level"] == 0.9


def test_projection_of_3d_ellipsoid_is_the_marginal() -> None:
    rng = np.random.default_rng(2)
    L = rng.normal(size=(3, 3))
    C = L @ L.T + np.eye(3)
    e = Ellipsoid.from_covariance(np.zeros(3), C, 0.95)
    pts = e.boundary_2d(0, 2)
    sub = C[np.ix_([0, 2], [0, 2])]
    m2 = np.einsum("ni,ij,nj->n", pts, np.linalg.inv(sub), pts)
    np.testing.assert_allclose(m2, e.quantile, rtol=1e-10)


def test_bad_level_and_covariance() -> None:
    with pytest.raises(InputError, match="level"):
        Ellipsoid.from_covariance([0, 0], np.eye(2), level=1.5)
    with pytest.raises(InputError, match="positive definite"):
        Ellipsoid.from_covariance([0, 0], np.diag([1.0, -1.0]))

"""numpy.linalg's LAPACK routines on one float64 matrix, without the wrapper's per-call work.

``np.linalg.eigh`` on a 4 x 4 matrix takes about 15 us, of which the LAPACK call (numpy's
``_umath_linalg`` gufunc) is 5: the rest is its argument checks, type promotion and result
wrapping. The press fits call these routines a few times per fit (the convergence test, the
Newton steps, the covariance), always on a float64 C array they have just computed, so here
the gufunc is called directly, under the same error state as numpy's wrapper (a LAPACK failure
raises the same ``LinAlgError``): the same routine on the same input, the same bits
(``tests/methods/press/test_fast_paths.py`` compares them). Anything else (another dtype or
shape, a numpy without the gufuncs) goes through ``np.linalg``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.linalg import LinAlgError

_U: Any
try:  # numpy's own gufuncs and error state (private: np.linalg where they are missing)
    from numpy._core.umath import _extobj_contextvar, _make_extobj
    from numpy.linalg import _umath_linalg as _U
except ImportError:  # pragma: no cover - another numpy
    _U = None

__all__ = ["cholesky", "eigh", "eigvalsh", "inv", "solve"]


def _raise(message: str) -> Any:
    def callback(err: object, flag: object) -> None:
        raise LinAlgError(message)

    return callback


def _state(call: Any) -> Any:
    """numpy.linalg's error state around its gufunc (``np.errstate(call=..., invalid="call",
    over/divide/under="ignore")``), built once: entering an ``np.errstate`` costs 4 us."""
    return _make_extobj(call=call, invalid="call", over="ignore", divide="ignore", under="ignore")


def _run(state: Any, gufunc: Any, *args: np.ndarray, signature: str) -> Any:
    token = _extobj_contextvar.set(state)
    try:
        return gufunc(*args, signature=signature)
    finally:
        _extobj_contextvar.reset(token)


if _U is not None:
    _EIG, _SING, _POSDEF = (
        _state(_raise(m))
        for m in (
            "Eigenvalues did not converge",
            "Singular matrix",
            "Matrix is not positive definite",
        )
    )


def _direct(a: np.ndarray) -> bool:
    """The gufunc applies: numpy's, a square 2-D float64 ndarray."""
    return (
        _U is not None
        and type(a) is np.ndarray
        and a.dtype == np.float64
        and a.ndim == 2
        and a.shape[0] == a.shape[1]
    )


def eigh(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.linalg.eigh(a)`` (lower triangle): eigenvalues ascending, eigenvectors by column."""
    if not _direct(a):
        w, v = np.linalg.eigh(a)
        return w, v
    return _run(_EIG, _U.eigh_lo, a, signature="d->dd")


def eigvalsh(a: np.ndarray) -> np.ndarray:
    """``np.linalg.eigvalsh(a)`` (lower triangle)."""
    if not _direct(a):
        return np.linalg.eigvalsh(a)
    return _run(_EIG, _U.eigvalsh_lo, a, signature="d->d")


def inv(a: np.ndarray) -> np.ndarray:
    """``np.linalg.inv(a)``."""
    if not _direct(a):
        return np.linalg.inv(a)
    return _run(_SING, _U.inv, a, signature="d->d")


def cholesky(a: np.ndarray) -> np.ndarray:
    """``np.linalg.cholesky(a)``: the lower factor."""
    if not _direct(a):
        return np.linalg.cholesky(a)
    return _run(_POSDEF, _U.cholesky_lo, a, signature="d->d")


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.linalg.solve(a, b)`` for a vector ``b``."""
    direct = type(b) is np.ndarray and b.dtype == np.float64 and b.shape == a.shape[:1]
    if not (direct and _direct(a)):
        return np.linalg.solve(a, b)
    return _run(_SING, _U.solve1, a, b, signature="dd->d")

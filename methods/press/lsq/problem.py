"""The one problem object of the press solvers (``core.solve_ls``, ``batch.solve_ls_batch``).

A weighted least-squares problem of one compiled model: minimise
``1/2 sum_l wt_l (h_l(p, q) - zbar_l)^2`` over ``lower <= p <= upper`` from ``p0``, solved in
scaled ``x = p / scale``. ``zbar`` and ``wt`` are flat (n_l,) for one fit or (N, n_l) for N fits
of the same model that differ only in their data and weights (the split tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from methods.errors import InputError

if TYPE_CHECKING:
    from methods.press.lsq.core import CompiledModel


@dataclass(frozen=True)
class LSProblem:
    """``comp`` the compiled model (n_p, n_q, n_s), ``q`` (n_q,) setpoint forces, ``zbar`` and
    ``wt`` (n_l,) or (N, n_l) with n_l = n_q * n_s aggregated data and weights (0 where a
    residual is not used), ``p0``/``scale``/``lower``/``upper`` (n_p,) in model units."""

    comp: CompiledModel
    q: np.ndarray
    zbar: np.ndarray
    wt: np.ndarray
    p0: np.ndarray
    scale: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        n_p, n_l = self.comp.n_p, self.comp.n_q * self.comp.n_s
        if np.shape(self.q) != (self.comp.n_q,):
            raise InputError(f"q: shape {np.shape(self.q)}, expected ({self.comp.n_q},)")
        z = np.shape(self.zbar)
        if z not in ((n_l,), (z[0], n_l)):
            raise InputError(f"zbar: shape {z}, expected ({n_l},) or (N, {n_l})")
        if np.shape(self.wt) != z:
            raise InputError(f"wt: shape {np.shape(self.wt)}, expected the shape of zbar {z}")
        for name in ("p0", "scale", "lower", "upper"):
            if np.shape(getattr(self, name)) != (n_p,):
                raise InputError(
                    f"{name}: shape {np.shape(getattr(self, name))}, expected ({n_p},)"
                )

    @property
    def batched(self) -> bool:
        """True for N problems (zbar (N, n_l)), False for one."""
        return np.ndim(self.zbar) == 2

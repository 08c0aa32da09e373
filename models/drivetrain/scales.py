"""Orders of magnitude of a drive train from its recording, before any search (issue 13).

The rigid-body inverse dynamics ``u = J a + f_v v + M_C sign(v) + offset`` is linear in
``(J, f_v, M_C, offset)``: a least-squares fit on the recording's (already low-passed) velocity
and its central-difference acceleration - the IDIM-LS idea of the EMPS reference - gives the
total inertia, viscous and Coulomb friction and a constant offset (gravity, for a vertical
axis: ``M_G = -offset``). Samples near zero velocity are left out (the sign is undefined there
and stiction dominates). The values are scales, not results: a flexible or geared machine
identifies its own parameters in the search, centred on these magnitudes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from methods.errors import InputError

COLUMNS = ("J", "f_v", "M_C", "offset")


@dataclass(frozen=True)
class Scales:
    """Estimates (``J`` total inertia, ``f_v`` viscous, ``M_C`` Coulomb, ``offset``), their
    standard errors and ``r2`` of the fit (share of the input's variance explained)."""

    values: dict[str, float]
    stderr: dict[str, float]
    r2: float
    n_used: int

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v:.4g}" for k, v in self.values.items())
        return f"scales from the data (rigid-body LS, R^2 {self.r2:.3f}, {self.n_used} samples): {parts}"


def estimate_scales(recording: pd.DataFrame, *, speed_fraction: float = 0.05) -> Scales:
    """Linear least squares of the rigid-body model on ``t_s``, ``torque_Nm`` and
    ``velocity_rad_s``; samples with ``|v|`` below ``speed_fraction`` of the largest speed
    are left out."""
    t = np.asarray(recording["t_s"], float)
    u = np.asarray(recording["torque_Nm"], float)
    v = np.asarray(recording["velocity_rad_s"], float)
    if t.size < 10:
        raise InputError(f"scales from the data need at least 10 samples, got {t.size}")
    a = np.gradient(v, t)
    keep = np.abs(v) > speed_fraction * np.max(np.abs(v))
    keep[[0, -1]] = False  # one-sided differences at the ends
    if keep.sum() < 10 or np.ptp(np.sign(v[keep])) == 0:
        raise InputError("scales from the data need motion in both directions")
    X = np.column_stack([a, v, np.sign(v), np.ones_like(v)])[keep]
    y = u[keep]
    col = np.linalg.norm(X, axis=0)
    theta, *_ = np.linalg.lstsq(X / col, y, rcond=None)
    theta = theta / col
    residual = y - X @ theta
    dof = max(len(y) - X.shape[1], 1)
    cov = np.linalg.pinv(X.T @ X) * float(residual @ residual) / dof
    r2 = 1.0 - float(residual @ residual) / float(np.sum((y - y.mean()) ** 2))
    return Scales(dict(zip(COLUMNS, theta.tolist())),
                  dict(zip(COLUMNS, np.sqrt(np.diag(cov)).tolist())), r2, int(keep.sum()))  # fmt: skip

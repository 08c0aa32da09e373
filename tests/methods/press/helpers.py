"""Small models and table builders shared by the press tests."""

from __future__ import annotations

from typing import ClassVar

import casadi as ca
import numpy as np
import pandas as pd


def _sym(*xs) -> bool:
    return any(isinstance(x, ca.SX | ca.MX) for x in xs)


class Decay:
    """y_j = a exp(-b t_j): curvature in (a, b); hand derivatives in test_estimation."""

    name = "decay"
    sensors = ("y",)
    parameters: ClassVar[dict] = {"a": 1.0, "b": 1.0}
    bounds: ClassVar[dict] = {"a": (1e-3, 1e3), "b": (1e-3, 1e3)}

    def response(self, p, forces):
        if _sym(p, forces):
            return p[0] * ca.exp(-p[1] * forces)
        return (p[0] * np.exp(-p[1] * np.asarray(forces, float)))[:, None]


class Linear:
    """Two sensors, linear in p: y1 = p0 q + p1, y2 = p1 q^2 / 1e4 (S = 0 exactly)."""

    name = "linear"
    sensors = ("y1", "y2")
    parameters: ClassVar[dict] = {"p0": 1.0, "p1": 1.0}

    def response(self, p, forces):
        if _sym(p, forces):
            return ca.horzcat(p[0] * forces + p[1], p[1] * forces**2 / 1e4)
        q = np.asarray(forces, float)
        return np.column_stack([p[0] * q + p[1], p[1] * q**2 / 1e4])


def table_from(z: np.ndarray, forces: np.ndarray, sensors, setpoints=None) -> pd.DataFrame:
    """Long table from z (n_M, n_q, n_S) and forces (n_M, n_q) or (n_q,)."""
    n_m, n_q, n_s = z.shape
    f = np.broadcast_to(np.asarray(forces, float), (n_m, n_q))
    sp = f[0] if setpoints is None else np.asarray(setpoints, float)
    return pd.DataFrame(
        {
            "series": np.repeat(np.arange(n_m), n_q * n_s),
            "step": np.tile(np.repeat(np.arange(n_q), n_s), n_m),
            "force_setpoint_N": np.tile(np.repeat(sp, n_s), n_m),
            "force_N": np.repeat(f.ravel(), n_s),
            "sensor": np.tile(np.array(sensors, dtype=object), n_m * n_q),
            "displacement_um": z.ravel(),
        }
    )

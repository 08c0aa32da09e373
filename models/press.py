"""Surrogate of one linkage of the 3D Servo Press, three friction variants, and its digital twin.

Quasi-static, lumped parameters, drives fixed; the only input is the process force ``q_P`` (N)
at the ram, applied along an ordered loading-unloading scenario (``forces``, shape ``(n_q,)``).

Force path. Friction in the joints acts as a hysteresis operator on the force ``f`` that the
elastic chain transmits (``f = P[q]``, N):

- M1: no friction, ``f = q``;
- M2: Coulomb friction of constant magnitude ``r`` (N): a play operator of half-width ``r``,
  ``f_j = max(q_j - r, min(q_j + r, f_{j-1}))``, ``f_{-1} = 0`` (virgin state);
- M3: load-dependent Coulomb friction ``mu * |q|``: the same play with half-width ``mu * |q_j|``.

Elastic chain (displacements in micrometres, stiffnesses in N/um = kN/mm). The unknown axial
stiffnesses ``k5``, ``k7`` of members 5 and 7 enter through two compliance combinations

    g1(p) = c5 / k5 + c7 / k7        (um/N; the vertical path through D and B0)
    g2(p) = e5 / k5 + e7 / k7        (um/N; the horizontal motion of joint F)

    D_vertical   = g1 f + u_b(f) + f / k_bar
    F_horizontal = g2 f
    B0_vertical  = lam * g1 f + f / k_frame

so D and B0 see ``(k5, k7)`` only through ``g1`` (design ``101`` has rank-1 information) and F
through ``g2``. The ram bearing is progressive (stiffening):
``u_b(f) = f / (k_b * sqrt(1 + f / f_b))``. ``response`` works on numpy arrays and on CasADi
symbols (``p`` and/or ``forces`` symbolic), so the core can compile exact derivatives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import casadi as ca
import numpy as np
import pandas as pd

from methods.errors import InputError

SENSORS: tuple[str, ...] = ("D_vertical", "F_horizontal", "B0_vertical")
FRICTION_MODELS: tuple[str, ...] = ("M1", "M2", "M3")

#: Setpoints of the default scenario (N): 15 loading steps 10..150 kN, 14 unloading steps back.
LOADING_N = np.linspace(10_000.0, 150_000.0, 15)
DEFAULT_SETPOINTS_N = np.concatenate([LOADING_N, LOADING_N[-2::-1]])

#: Nominal (FE-design) stiffnesses, N/um: the fit's starting values.
NOMINAL = {"k5": 5000.0, "k7": 3000.0}
#: The twin's "true" stiffnesses (assembled machine differs from the FE design by a few %).
TRUE_STIFFNESS = {"k5": 5400.0, "k7": 2800.0}
#: Friction configuration per model: M2 play half-width (N), M3 friction coefficient (-).
COULOMB_N = 3000.0
MU = 0.03
#: Sensor standard deviations of the twin, um (B0 is the least precise gauge).
SIGMA_UM = {"D_vertical": 0.5, "F_horizontal": 0.4, "B0_vertical": 0.8}

# Known linkage constants (lever ratios are dimensionless, stiffnesses in N/um, forces in N).
_C5, _C7 = 1.0, 0.6
_E5, _E7 = 0.7, 0.1
_LAM = 0.35
_K_BAR, _K_FRAME, _K_B, _F_B = 10_000.0, 15_000.0, 8_000.0, 20_000.0


def _is_symbolic(*xs: object) -> bool:
    return any(isinstance(x, ca.SX | ca.MX | ca.DM) for x in xs)


@dataclass(frozen=True)
class PressModel:
    """One press linkage with friction variant ``friction`` ("M1", "M2" or "M3").

    Parameters ``k5``, ``k7`` (N/um); with ``estimate_friction=True`` the friction parameter
    (``r_N`` for M2, ``mu`` for M3) is estimated too (n_p = 3). ``coulomb_N`` and ``mu`` are the
    fixed friction configuration otherwise.
    """

    friction: str = "M3"
    coulomb_N: float = COULOMB_N
    mu: float = MU
    estimate_friction: bool = False

    def __post_init__(self) -> None:
        if self.friction not in FRICTION_MODELS:
            raise InputError(f"friction must be one of {FRICTION_MODELS}, got {self.friction!r}")
        if self.estimate_friction and self.friction == "M1":
            raise InputError("M1 has no friction parameter to estimate")

    @property
    def name(self) -> str:
        return self.friction + ("+friction" if self.estimate_friction else "")

    @property
    def sensors(self) -> tuple[str, ...]:
        return SENSORS

    @property
    def parameters(self) -> dict[str, float]:
        p = dict(NOMINAL)
        if self.estimate_friction:
            p.update({"r_N": self.coulomb_N} if self.friction == "M2" else {"mu": self.mu})
        return p

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        b = {"k5": (50.0, 5e5), "k7": (50.0, 5e5)}
        if self.estimate_friction:
            b.update({"r_N": (0.0, 5e4)} if self.friction == "M2" else {"mu": (0.0, 0.5)})
        return b

    @property
    def default_forces(self) -> np.ndarray:
        """Setpoints of the default loading-unloading scenario, N, shape (29,)."""
        return DEFAULT_SETPOINTS_N.copy()

    @property
    def nominal_sigma(self) -> dict[str, float]:
        return dict(SIGMA_UM)

    def transmitted_force(self, p, forces):
        """Play operator ``f = P[q]`` along the ordered scenario (list of n_q scalars, N)."""
        sym = _is_symbolic(p, forces)
        fmax, fmin = (ca.fmax, ca.fmin) if sym else (np.maximum, np.minimum)
        n_q = forces.shape[0] if sym else len(forces)
        q = [forces[j] for j in range(n_q)]
        if self.friction == "M1":
            return q
        width = p[2] if self.estimate_friction else None
        out, prev = [], 0.0
        for qj in q:
            if self.friction == "M2":
                r = width if width is not None else self.coulomb_N
            else:
                absq = ca.fabs(qj) if sym else abs(qj)
                r = (width if width is not None else self.mu) * absq
            prev = fmax(qj - r, fmin(qj + r, prev))
            out.append(prev)
        return out

    def response(self, p, forces):
        """Displacements (um), shape ``(n_q, 3)``, columns in ``sensors`` order.

        ``p``: parameter vector in ``parameters`` order (numpy or CasADi); ``forces``: the
        ordered scenario in N, shape ``(n_q,)`` (numpy or CasADi).
        """
        sym = _is_symbolic(p, forces)
        if not sym:
            p = np.asarray(p, dtype=float)
            forces = np.asarray(forces, dtype=float)
        k5, k7 = p[0], p[1]
        g1 = _C5 / k5 + _C7 / k7
        g2 = _E5 / k5 + _E7 / k7
        sqrt = ca.sqrt if sym else np.sqrt
        rows = []
        for f in self.transmitted_force(p, forces):
            u_b = f / (_K_B * sqrt(1.0 + f / _F_B))
            rows.append([g1 * f + u_b + f / _K_BAR, g2 * f, _LAM * g1 * f + f / _K_FRAME])
        if sym:
            return ca.vertcat(*[ca.horzcat(*r) for r in rows])
        return np.array(rows, dtype=float).reshape(len(rows), 3)


M1 = PressModel("M1")
M2 = PressModel("M2")
M3 = PressModel("M3")


def simulate_press(
    truth: str | PressModel = "M3",
    seed: int = 1,
    n_series: int = 6,
    *,
    parameters: Mapping[str, float] | None = None,
    sigma_um: Mapping[str, float] | None = None,
    setpoints_N: Sequence[float] | None = None,
    force_scatter_N: float = 150.0,
    force_scatter_rel: float = 0.002,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Digital twin: lab table of ``n_series`` repetitions of the scenario under ``truth``.

    Each series applies forces ``q_ij = q^d_j + eps``, ``eps ~ N(0, (force_scatter_N +
    force_scatter_rel * q^d_j)^2)`` (pneumatic pressure scatter, clipped at 0), the true model
    runs along that series' own force path, and each sensor adds ``N(0, sigma_k^2)`` noise.
    Defaults: truth stiffnesses ``TRUE_STIFFNESS`` (k5 = 5400, k7 = 2800 N/um), friction
    ``COULOMB_N`` = 3 kN (M2) and ``MU`` = 0.03 (M3), sigmas ``SIGMA_UM`` (0.5, 0.4, 0.8 um).

    Returns ``(table, sensor_sheet)``: the long lab table (series, step, force_setpoint_N,
    force_N, sensor, displacement_um) and a sheet (sensor, sigma_um).
    """
    model = truth if isinstance(truth, PressModel) else PressModel(str(truth))
    rng = np.random.default_rng(seed)
    q_d = np.asarray(DEFAULT_SETPOINTS_N if setpoints_N is None else setpoints_N, dtype=float)
    sig = dict(SIGMA_UM if sigma_um is None else sigma_um)
    true_p = dict(TRUE_STIFFNESS if parameters is None else parameters)
    p = [true_p.get(name, default) for name, default in model.parameters.items()]
    records = []
    for i in range(n_series):
        q = np.clip(
            q_d + rng.normal(size=q_d.size) * (force_scatter_N + force_scatter_rel * q_d), 0, None
        )
        h = model.response(p, q)
        noise = rng.normal(size=h.shape) * np.array([sig[s] for s in SENSORS])
        for j in range(q_d.size):
            for k, s in enumerate(SENSORS):
                records.append((i, j, q_d[j], q[j], s, h[j, k] + noise[j, k]))
    table = pd.DataFrame(
        records,
        columns=["series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um"],
    )
    sheet = pd.DataFrame({"sensor": list(SENSORS), "sigma_um": [sig[s] for s in SENSORS]})
    return table, sheet

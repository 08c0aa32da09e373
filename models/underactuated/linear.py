"""Two-mass system and chain of N masses (linear springs), with exact flat solutions.

Chain: masses ``m`` at ``x_1..x_N`` joined by springs ``k`` of rest length ``d``; force ``F``
on mass 1; output ``x_N = s(t)``. Flat solution (from the output backwards)::

    x_{N-1} = x_N - d + (m/k) x_N''
    x_{i-1} = x_i - d - (x_{i+1} - x_i - d) + (m/k) x_i''      (1 < i < N)
    F = m x_1'' - k (x_2 - x_1 - d)

needing ``s^(2N)``. For N = 2 with masses ``m1, m2`` this is
``x1 = s - d + (m2/k) s''``, ``F = (m1 m2/k) s'''' + (m1 + m2) s''`` (docs/methods.md §3).
For N >= 3 the system is outside the paper's class (``rank([C; B]) = 2 < N``, relative degree
``2N``): the projected equations are still square and are solved the same way, the demand must
be ``C^(2N)`` (steps of degree >= 4N + 1).
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import pandas as pd

from methods.dae import Demand, RankPolicy, ServoProblem
from methods.errors import InputError
from models.underactuated.base import Parameter, System, SystemSpec


def _chain_problem(name: str, masses: list[float], k: float, d: float) -> ServoProblem:
    N = len(masses)
    pb = ServoProblem(name)
    x = pb.coordinates([f"x{i + 1}" for i in range(N)], nominal=[(i - N + 1) * d for i in range(N)])
    pb.controls(["F"])
    f = ca.SX.zeros(N)
    for i in range(N - 1):
        spring = k * (x[i + 1] - x[i] - d)
        f[i] += spring
        f[i + 1] -= spring
    G = ca.DM.zeros(N, 1)
    G[0] = 1
    pb.set_dynamics(M=ca.diag(ca.DM(masses)), f=f, G=G)
    pb.set_outputs(x[N - 1], [f"x{N}"], demand_order=2 * N)
    return pb.setup(rank_policy=RankPolicy.STRICT if N == 2 else RankPolicy.REPORT)


def chain_exact(masses: list[float], k: float, d: float, demand: Demand, out: str, t: np.ndarray):
    """Exact flat solution (DataFrame: t_s, x_i, v_x_i, F) of the chain for ``demand``."""
    N = len(masses)
    K = 2 * N + 1
    s = demand.evaluate([out], t, K)[:, 0, :]  # (K+1, nt): derivatives of the output
    xs: list[np.ndarray] = [np.empty(0)] * N
    xs[N - 1] = s
    if N >= 2:  # every level loses two derivative orders (x'' appears)
        xs[N - 2] = s[: K - 1] + (masses[N - 1] / k) * s[2:]
        xs[N - 2][0] -= d
    for i in range(N - 2, 0, -1):  # x_{i-1} = 2 x_i - x_{i+1} + (m_i/k) x_i'' (0-based i)
        cur, nxt = xs[i], xs[i + 1]
        L = cur.shape[0] - 2
        xs[i - 1] = 2 * cur[:L] - nxt[:L] + (masses[i] / k) * cur[2:]
    x1, x2 = xs[0], xs[1]
    F = masses[0] * x1[2] - k * (x2[0] - x1[0] - d)
    cols = {"t_s": t}
    cols.update({f"x{i + 1}": xs[i][0] for i in range(N)})
    cols.update({f"v_x{i + 1}": xs[i][1] for i in range(N)})
    cols["F"] = F
    return pd.DataFrame(cols)


def _demand(out: str, degree: int, t1: float) -> dict:
    return {
        "t_end": t1 + 1.5,
        "outputs": {
            out: {"type": "step", "start": 0.0, "end": 1.0, "t0": 0.5, "t1": t1, "degree": degree}
        },
    }


def _build_two_mass(name, description, params, p) -> System:
    masses = [p["m1"], p["m2"]]
    pb = _chain_problem(name, masses, p["k"], p["d"])

    def exact(demand: Demand, t: np.ndarray) -> pd.DataFrame:
        return chain_exact(masses, p["k"], p["d"], demand, "x2", t)

    return System(name, description, params, pb, _demand("x2", 9, 3.5), exact)


def _build_chain(name, description, params, p) -> System:
    N = int(p["N"])
    if N < 2:
        raise InputError(f"{name}.N: need at least 2 masses, got {N}")
    masses = [p["m"]] * N
    pb = _chain_problem(name, masses, p["k"], p["d"])

    def exact(demand: Demand, t: np.ndarray) -> pd.DataFrame:
        return chain_exact(masses, p["k"], p["d"], demand, f"x{N}", t)

    return System(name, description, params, pb, _demand(f"x{N}", 4 * N + 1, 4.0), exact)


TWO_MASS = SystemSpec(
    "two_mass",
    "two masses joined by a spring; force F on mass 1 moves mass 2 along s(t) (Fig. 1 of the seed)",
    (
        Parameter("m1", 1.0, "kg", "actuated mass"),
        Parameter("m2", 2.0, "kg", "output mass"),
        Parameter("k", 100.0, "N/m", "spring stiffness"),
        Parameter("d", 0.5, "m", "spring rest length"),
    ),
    _build_two_mass,
)

CHAIN = SystemSpec(
    "chain",
    "chain of N equal masses joined by springs; force F on mass 1, output the last mass",
    (
        Parameter("N", 3, "-", "number of masses (>= 2)", integer=True),
        Parameter("m", 1.0, "kg", "mass of each body"),
        Parameter("k", 100.0, "N/m", "spring stiffness"),
        Parameter("d", 0.5, "m", "spring rest length"),
    ),
    _build_chain,
)

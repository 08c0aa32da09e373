"""A press frame read by 60 candidate displacement probes: which 10 to install?

The frame's compliance has four parts - two columns (stiffness ``k_col`` N/um), the
crosshead (``k_head``), the bearing (``k_bear``) - and a load-dependent clearance that closes as
``c_gap * (1 - exp(-F / 50 kN))``. A probe at position ``s`` in [0, 1] along one of four
members reads a member-specific mixture of these parts (influence coefficients from the
frame's geometry, here smooth functions of ``s``), so probes on the same member carry nearly
the same information and the design must spread them.

    greylab press design --model gauges:Frame --sheet gauges.sensors.csv --max-sensors 10

(no measurements yet: the design uses the nominal parameters, ``default_forces`` and the
sheet's sigma; `docs/models.md`).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

MEMBERS = ("column_left", "column_right", "crosshead", "bearing")
PER_MEMBER = 15


def _influence() -> tuple[tuple[str, ...], np.ndarray]:
    """Probe names and their (n_probes, 4) influence coefficients, deterministic."""
    names, rows = [], []
    for m, member in enumerate(MEMBERS):
        for i in range(PER_MEMBER):
            s = (i + 0.5) / PER_MEMBER
            weights = {
                0: [s, 0.1 * s, 0.2 * s * (1 - s), 0.05],
                1: [0.1 * s, s, 0.2 * s * (1 - s), 0.05],
                2: [0.5 * (1 - s), 0.5 * s, 4 * s * (1 - s), 0.1],
                3: [0.05, 0.05, 0.1 * s, 0.3 + s],
            }[m]
            names.append(f"{member}_{i + 1:02d}")
            rows.append(weights)
    return tuple(names), np.array(rows)


SENSORS, INFLUENCE = _influence()


class Frame:
    name = "frame"
    parameters = {"k_col": 2000.0, "k_head": 3000.0, "k_bear": 5000.0, "c_gap": 20.0}
    bounds = {"k_col": (100.0, 1e5), "k_head": (100.0, 1e5), "k_bear": (100.0, 1e5),
              "c_gap": (0.0, 200.0)}  # fmt: skip
    sensors = SENSORS
    default_forces = np.r_[np.linspace(0.0, 200e3, 11), np.linspace(180e3, 0.0, 10)]  # N
    nominal_sigma = dict.fromkeys(SENSORS, 0.5)  # um

    def response(self, p, forces):
        k_col, k_head, k_bear, c_gap = p[0], p[1], p[2], p[3]
        gap = c_gap * (1 - np.exp(-forces / 50e3)) if isinstance(forces, np.ndarray) else (
            c_gap * (1 - ca.exp(-forces / 50e3)))  # fmt: skip
        parts = [forces / k_col, forces / k_col, forces / k_head, forces / k_bear + gap]
        columns = [sum(INFLUENCE[j, i] * parts[i] for i in range(4)) for j in range(len(SENSORS))]
        if isinstance(forces, np.ndarray) and not isinstance(p, ca.SX):
            return np.column_stack(columns)
        return ca.horzcat(*columns)

"""Normality of the measurement errors (Algorithm 1, step 2).

Per sensor ``k``: ``z~_ijk = z_ijk - mean_i z_ijk`` (deviation from the mean over series at
each step), pooled over steps and series, Shapiro-Wilk at level ``alpha``. The deviations of
one step are slightly correlated (they sum to zero); the test is applied to all of them as in
the seed, which is a good approximation for n_M >= 3.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from methods.errors import InputError
from methods.press.data import to_cube


@dataclass(frozen=True)
class NormalityReport:
    """``table`` one row per sensor (sensor, W, p_value, normal, n); ``alpha``; ``all_normal``."""

    table: pd.DataFrame
    alpha: float

    @property
    def all_normal(self) -> bool:
        return bool(self.table["normal"].all())

    def summary(self) -> str:
        lines = [f"Shapiro-Wilk per sensor at {self.alpha:g}:"]
        for r in self.table.to_dict("records"):
            verdict = "normal" if r["normal"] else "NOT normal"
            lines.append(
                f"  {r['sensor']}: W={r['W']:.4f} p={r['p_value']:.3g} n={r['n']} {verdict}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        rows = [
            {"sensor": str(r["sensor"]), "W": float(r["W"]), "p_value": float(r["p_value"]),
             "normal": bool(r["normal"]), "n": int(r["n"])}
            for r in self.table.to_dict("records")
        ]  # fmt: skip
        d = {"alpha": float(self.alpha), "all_normal": self.all_normal, "sensors": rows}
        json.dumps(d)
        return d


def check_normality(table: pd.DataFrame, *, alpha: float = 0.05) -> NormalityReport:
    """Shapiro-Wilk on the deviations from the series mean, per sensor (see module doc)."""
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must lie in (0, 1), got {alpha}")
    data = to_cube(table)
    n_m = data.z.shape[0]
    if n_m < 3:
        raise InputError(
            f"the normality test needs at least 3 measurement series, the table has {n_m}"
        )
    dev = data.z - data.z.mean(axis=0, keepdims=True)
    rows = []
    for k, s in enumerate(data.sensors):
        x = dev[:, :, k].ravel()
        if np.ptp(x) == 0:
            raise InputError(f"sensor {s!r} has no scatter over the series: cannot test normality")
        res = stats.shapiro(x)
        rows.append(
            {"sensor": s, "W": float(res.statistic), "p_value": float(res.pvalue),
             "normal": bool(res.pvalue >= alpha), "n": int(x.size)}
        )  # fmt: skip
    return NormalityReport(pd.DataFrame(rows), float(alpha))

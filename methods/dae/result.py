"""Result of an inverse simulation (frozen; ``summary()`` for people, ``to_dict()`` for tracking)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from methods.dae.demand import Demand
from methods.dae.problem import RankInfo

__all__ = ["InverseResult"]


@dataclass(frozen=True)
class InverseResult:
    """States and feedforward controls realising a demand.

    Fields: ``table`` (DataFrame: ``t_s``, every coordinate, velocity and control by name, SI
    units), ``method``, ``dt`` (s), ``max_constraint_violation`` (max over steps and outputs of
    ``|Phi(q) - gamma(t)|``, output units), ``newton_iterations_total`` / ``_max`` (per step),
    ``wall_time_s`` (solve, excluding compilation), ``compile_time_s``, ``rank_info`` (at the
    consistent start), ``partitions`` (coordinate partitions used, with the switch times),
    ``warnings`` (messages also emitted with ``warnings.warn``), ``demand`` (not serialised).
    """

    problem_name: str
    method: str
    dt: float
    table: pd.DataFrame = field(repr=False)
    output_names: tuple[str, ...]
    control_names: tuple[str, ...]
    max_constraint_violation: float
    newton_iterations_total: int
    newton_iterations_max: int
    wall_time_s: float
    compile_time_s: float
    rank_info: RankInfo
    partitions: tuple[dict, ...]
    warnings: tuple[str, ...]
    demand: Demand = field(repr=False, compare=False)

    @property
    def newton_iterations(self) -> dict[str, float]:
        steps = max(len(self.table) - 1, 1)
        return {
            "total": self.newton_iterations_total,
            "max": self.newton_iterations_max,
            "mean": self.newton_iterations_total / steps,
        }

    @property
    def n_steps(self) -> int:
        return len(self.table) - 1

    def summary(self) -> str:
        t = self.table["t_s"]
        lines = [
            f"inverse simulation of {self.problem_name}: {self.method}, dt = {self.dt:g} s, "
            f"t = {t.iloc[0]:g}..{t.iloc[-1]:g} s ({self.n_steps} steps)",
            f"  {self.rank_info.summary()}",
            f"  max servo-constraint violation {self.max_constraint_violation:.3g}",
            f"  Newton iterations: total {self.newton_iterations_total}, max/step "
            f"{self.newton_iterations_max}, mean {self.newton_iterations['mean']:.2f}",
            f"  wall time {self.wall_time_s:.3f} s (+ compile {self.compile_time_s:.3f} s)",
        ]
        for name in self.control_names:
            col = self.table[name]
            lines.append(f"  control {name}: min {col.min():.6g}, max {col.max():.6g}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        t = self.table["t_s"]
        return {
            "problem": self.problem_name,
            "method": self.method,
            "dt": float(self.dt),
            "t_start": float(t.iloc[0]),
            "t_end": float(t.iloc[-1]),
            "n_steps": int(self.n_steps),
            "max_constraint_violation": float(self.max_constraint_violation),
            "newton_iterations": {k: float(v) for k, v in self.newton_iterations.items()},
            "wall_time_s": float(self.wall_time_s),
            "compile_time_s": float(self.compile_time_s),
            "rank_info": self.rank_info.to_dict(),
            "partitions": [dict(p) for p in self.partitions],
            "warnings": list(self.warnings),
            "controls_range": {
                n: [float(self.table[n].min()), float(self.table[n].max())]
                for n in self.control_names
            },
            "demand": self.demand.spec or None,
        }

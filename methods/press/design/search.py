"""Which sensor subsets a design evaluates, and how: exhaustive enumeration where it is cheap,
branch-and-bound with a proven gap beyond that (`methods.press.design.bnb`), under a budget.

Budgets: exactly ``n`` sensors, at most ``n`` sensors, or a total cost ``<= budget`` (a cost
per candidate sensor; optionally with a sensor count as well). Enumeration evaluates every
subset that fits the budget with Bard's covariance (second-order terms included); the search
evaluates the best subset of each admissible size (A/D/E on the first-order information, where
the criteria are convex and the bound is proven) and reports it with its second-order value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from methods.errors import InputError

#: subsets evaluated one by one at most; beyond: branch-and-bound
ENUMERATION_LIMIT = 20_000


@dataclass(frozen=True)
class Budget:
    """``exactly``: that many sensors; ``at_most``: up to that many; ``cost``: total cost of
    the chosen sensors at most this (with per-sensor ``costs``). None everywhere: every size."""

    exactly: int | None = None
    at_most: int | None = None
    cost: float | None = None

    def sizes(self, n_s: int) -> list[int]:
        if self.exactly is not None and self.at_most is not None:
            raise InputError(
                f"give either exactly {self.exactly} sensors or at most {self.at_most}, not "
                "both (CLI: --sensors all with --max-sensors)"
            )
        if self.exactly is not None:
            if not 1 <= self.exactly <= n_s:
                raise InputError(
                    f"n_sensors must lie between 1 and the {n_s} model sensors, got {self.exactly}"
                )
            return [self.exactly]
        top = n_s if self.at_most is None else self.at_most
        if not 1 <= top:
            raise InputError(f"at most {top} sensors: give at least 1")
        return list(range(1, min(top, n_s) + 1))

    def describe(self) -> str:
        parts = []
        if self.exactly is not None:
            parts.append(f"exactly {self.exactly} sensors")
        if self.at_most is not None:
            parts.append(f"at most {self.at_most} sensors")
        if self.cost is not None:
            parts.append(f"cost <= {self.cost:g}")
        return ", ".join(parts) or "every number of sensors"


def subset_count(n_s: int, sizes: Sequence[int]) -> int:
    return sum(math.comb(n_s, k) for k in sizes)


def check_costs(costs: np.ndarray | None, budget: Budget, n_s: int) -> np.ndarray | None:
    if costs is None:
        if budget.cost is not None:
            raise InputError("a cost budget needs a cost per sensor (column 'cost' of the sheet)")
        return None
    c = np.asarray(costs, dtype=float)
    if c.shape != (n_s,) or not np.all(np.isfinite(c)) or np.any(c < 0):
        raise InputError(f"sensor costs must be {n_s} finite numbers >= 0")
    if budget.cost is not None and (not np.isfinite(budget.cost) or budget.cost <= 0):
        raise InputError(f"the cost budget must be a positive number, got {budget.cost}")
    return c


def check_search_limits(gap_tol: float, time_limit: float) -> None:
    if not 0 < gap_tol < 1:  # NaN fails too
        raise InputError(f"gap_tol (--gap) must lie in (0, 1), got {gap_tol}")
    if not 0 < time_limit < float("inf"):
        raise InputError(f"time_limit (--time-limit) must be positive seconds, got {time_limit}")


def enumerate_subsets(
    n_s: int, sizes: Sequence[int], costs: np.ndarray | None, max_cost: float | None
) -> list[tuple[int, ...]]:
    """Every subset of the sizes whose cost fits (``max_cost`` None: any)."""
    out = []
    for size in sizes:
        for subset in itertools.combinations(range(n_s), size):
            if max_cost is None or costs is None or costs[list(subset)].sum() <= max_cost + 1e-9:
                out.append(subset)
    return out


def search_subsets(
    F: np.ndarray,
    sizes: Sequence[int],
    criterion: str,
    *,
    costs: np.ndarray | None,
    max_cost: float | None,
    gap_tol: float,
    time_limit: float,
    at_most: int | None = None,
) -> tuple[list[tuple[int, ...]], dict[str, Any]]:
    """Branch-and-bound on the first-order blocks ``F``: with a cost budget one search over
    every affordable subset (and the count rule: ``sizes`` of one exact size, or ``at_most``);
    without, the best subset of each size in ``sizes``. Returns the subsets and the search's
    report (nodes, worst gap, proven, seconds, one entry per search)."""
    from methods.press.design.bnb import branch_and_bound

    if max_cost is not None and costs is not None:
        count = at_most if at_most is not None else (sizes[0] if len(sizes) == 1 else None)
        calls: list[dict[str, Any]] = [
            dict(n_select=count, costs=costs, budget=max_cost, at_most=at_most is not None)
        ]
    else:
        calls = [dict(n_select=size) for size in sizes]
    chosen, runs = [], []
    for kwargs in calls:
        result = branch_and_bound(F, criterion=criterion, gap_tol=gap_tol,
                                  time_limit=time_limit / len(calls), **kwargs)  # fmt: skip
        chosen.append(tuple(result.selected))
        runs.append(result.to_dict())
    finite = [r["gap"] for r in runs if np.isfinite(r["gap"])]
    report = {
        "nodes": int(sum(r["n_nodes"] for r in runs)),
        "gap": float(max(finite)) if finite else float("inf"),
        "proven": all(r["proven"] for r in runs),
        "seconds": float(sum(r["seconds"] for r in runs)),
        "searches": runs,
    }
    return chosen, report

"""Branch-and-bound sensor selection under a count and/or a cost budget (first-order design).

Information ``M(omega) = base + sum_c omega_c F_c`` (F_c: (n_p, n_p) PSD per candidate), design
``C = M^-1``; criteria ``A = tr C``, ``D = log det C = -log det M``, ``E = lambda_max(C) =
1 / lambda_min(M)`` are convex in ``omega``. Constraints (``methods.press.design.bnb_relax.Rows``):
exactly ``n_select`` sensors, at most ``n_select`` (``at_most=True``), and/or a total cost
``costs . omega <= budget``. With PSD blocks a sensor never hurts (M grows in the Loewner order,
every criterion falls or stays), so at most n gives the value of exactly n when n <= n_c; the
search treats it as the general ``<=`` row (the unit-cost budget) and never relies on that.

Each node (some omega fixed to 0 or 1) relaxes ``omega_free in [0, 1]`` under the rows with the
residual count/budget. A and D: SLSQP with analytic gradients, and the VALID lower bound from
convexity at the point reached,

    f* >= f(w) + min_{s in node polytope} grad f(w)^T (s - w)      (Frank-Wolfe bound),

whose inner minimum is closed-form: the ``n_free`` smallest gradients for an exact count, a
fractional knapsack for one ``<=`` row (negative gradients by increasing gradient/cost, the last
one fractional), the count knapsack with the cost row dualised for both (every multiplier gives
a valid bound). E: Kelley's cutting planes on the concave ``lambda_min(M(omega))``: the LP
``max t, t <= u_i^T M(omega) u_i`` under the rows over-estimates the relaxed ``lambda_min``, so
``1/t`` is a valid lower bound at every iteration. A node whose completions cannot reach rank
n_p (rank of the fixed part + the most block rank the rows admit, or of the span of the fixed
part and the free blocks) is unidentifiable: bound inf.
Incumbents: greedy backward elimination and greedy addition by improvement per resource used,
then exchange moves (add, swap, drop) that keep every row, and the rounded relaxation of each
node. Gap: ``(UB - LB)/UB`` for A and E; ``exp(UB - LB) - 1`` for D (relative gap in det C).
"""

from __future__ import annotations

import heapq
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from methods.blas import single_threaded_blas
from methods.errors import InputError
from methods.press.design.bnb_greedy import Incumbents
from methods.press.design.bnb_relax import (
    Cuts,
    Objective,
    Rows,
    knapsack_min,
    relax_e,
    relax_smooth,
)

#: E: the node LP starts from the cuts of the shared pool tightest at the parent's point
E_START_CUTS = 64


@dataclass(frozen=True)
class DesignResult:
    """``selected`` candidate indices (sorted); ``value`` criterion of that design;
    ``bound`` proven lower bound on the optimum; ``gap`` (see module doc); ``proven`` (gap
    <= gap_tol); ``n_nodes``; ``seconds``; ``criterion``; ``total_cost`` of the selection and
    the cost ``budget`` (None without costs); ``n_select`` and ``at_most``: the count rule."""

    selected: tuple[int, ...]
    value: float
    bound: float
    gap: float
    proven: bool
    n_nodes: int
    seconds: float
    criterion: str
    total_cost: float | None = None
    budget: float | None = None
    n_select: int | None = None
    at_most: bool = False

    def summary(self) -> str:
        cost = "" if self.budget is None else f", cost {self.total_cost:.6g} of {self.budget:.6g}"
        return (
            f"{self.criterion}-design {list(self.selected)}: value {self.value:.6g}, bound "
            f"{self.bound:.6g}, gap {self.gap:.2e} ({'proven' if self.proven else 'not proven'}),"
            f" {self.n_nodes} nodes, {self.seconds:.1f} s{cost}"
        )

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["selected"] = [int(i) for i in self.selected]
        d = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in d.items()}
        json.dumps(d)
        return d


def branch_and_bound(
    fisher_blocks: np.ndarray,
    n_select: int | None,
    criterion: str = "D",
    *,
    base: np.ndarray | None = None,
    gap_tol: float = 1e-3,
    time_limit: float = 60.0,
    max_nodes: int = 20000,
    costs: np.ndarray | None = None,
    budget: float | None = None,
    at_most: bool = False,
) -> DesignResult:
    """Choose candidates with information blocks ``fisher_blocks`` (n_c, n_p, n_p) minimising
    the criterion of ``(base + sum F_c)^-1``; see module doc.

    ``n_select``: exactly that many sensors; ``at_most=True``: at most that many (with PSD
    blocks more sensors never hurt, so this has the optimal value of exactly ``n_select`` when
    ``n_select <= n_c``; it is searched as the unit-cost budget all the same, and may return
    fewer sensors when more add nothing); None: no count rule (needs a budget). ``costs``
    (n_c,) finite >= 0 with ``budget``: total cost of the selection <= budget, alone or with
    the count rule. InputError for invalid arguments (named), when no subset fits the rules,
    and, with costs, when no subset within the budget identifies the parameters (without
    costs such a search returns value inf, not proven, as before)."""
    F = np.asarray(fisher_blocks, dtype=float)
    if F.ndim != 3 or F.shape[1] != F.shape[2]:
        raise InputError(f"fisher_blocks must have shape (n_c, n_p, n_p), got {F.shape}")
    if not np.all(np.isfinite(F)):
        raise InputError("fisher_blocks must be finite")
    criterion = str(getattr(criterion, "value", criterion))
    if criterion not in ("A", "D", "E"):
        raise InputError(f"criterion must be one of ['A', 'D', 'E'], got {criterion!r}")
    n_c, n_p = F.shape[0], F.shape[1]
    rows, cost, what = _constraints(n_c, n_select, costs, budget, at_most)
    base = np.zeros((n_p, n_p)) if base is None else np.asarray(base, float)
    t0 = time.perf_counter()
    root = rows.reduce(-np.ones(n_c, dtype=int))
    if root is None:
        raise InputError(f"no subset of the {n_c} candidates has {what}")
    with single_threaded_blas():
        search = _Search(0.5 * (F + F.transpose(0, 2, 1)), base, criterion, rows, gap_tol)
        if cost is not None and search.rank_cap(root) < n_p:
            raise InputError(f"no subset with {what} identifies the {n_p} parameters (rank)")
        n_nodes, bound = search.run(root, t0 + time_limit, max_nodes)
    if cost is not None and not np.isfinite(search.best):
        proof = "" if bound == np.inf else " found within the time/node limit"
        raise InputError(f"no subset with {what} identifies the {n_p} parameters{proof}")
    gap = search.gap_of(search.best, bound)
    sel = tuple(sorted(int(i) for i in search.best_sel))
    return DesignResult(
        sel, float(search.best), float(bound), gap, bool(gap <= gap_tol * (1 + 1e-9)), n_nodes,
        time.perf_counter() - t0, criterion,
        None if cost is None else float(cost[list(sel)].sum()),
        None if cost is None else float(rows.rhs[-1]),
        None if n_select is None else int(n_select), bool(at_most),
    )  # fmt: skip


def _constraints(n_c: int, n_select, costs, budget, at_most: bool):
    """The rows (count first, then cost), the costs (or None) and a description for messages."""
    a, rhs, eq, what = [], [], [], []
    if n_select is not None:
        n = int(n_select)
        if n != n_select or n < 1 or (not at_most and n > n_c):
            top = "" if at_most else f"..{n_c}"
            raise InputError(f"n_select must be an integer in 1{top}, got {n_select}")
        a, rhs, eq = [np.ones(n_c)], [float(n)], [not at_most]
        what.append(f"{'at most' if at_most else 'exactly'} {n} sensors")
    elif at_most:
        raise InputError("at_most=True needs n_select (the largest number of sensors)")
    if costs is None:
        if budget is not None:
            raise InputError("budget needs costs= (one cost per candidate)")
        if n_select is None:
            raise InputError("n_select is required without costs and budget")
        return Rows(np.array(a), np.array(rhs), np.array(eq, bool)), None, what[0]
    c = np.asarray(costs, dtype=float)
    if c.shape != (n_c,):
        raise InputError(f"costs must have one entry per candidate ({n_c}), got shape {c.shape}")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise InputError(f"costs must be finite and >= 0, got {c.tolist()}")
    if budget is None:
        raise InputError("costs need a budget= (largest total cost)")
    b = float(budget)
    if not np.isfinite(b) or b < 0:
        raise InputError(f"budget must be a finite number >= 0, got {budget}")
    if b < c.min():
        raise InputError(f"budget {b:g} is below every candidate cost (cheapest {c.min():g})")
    a, rhs, eq = [*a, c], [*rhs, b], [*eq, False]
    what.append(f"total cost <= {b:g}")
    return Rows(np.array(a), np.array(rhs), np.array(eq, bool)), c, " and ".join(what)


class _Search:
    """Best-first branch-and-bound over 0/1 fixings; ``best``/``best_sel`` is the incumbent."""

    def __init__(self, F, base, criterion: str, rows: Rows, gap_tol: float) -> None:
        self.F, self.base, self.criterion, self.rows = F, base, criterion, rows
        self.n_c, self.n_p, self.gap_tol = F.shape[0], F.shape[1], gap_tol
        self.obj = Objective(F, base, criterion)
        self.ranks = np.array([np.linalg.matrix_rank(f, hermitian=True) for f in F], float)
        self.inc = Incumbents(F, base, self.obj, rows)
        found = [self.inc.exchange(s) for s in (self.inc.backward(), self.inc.forward())]
        self.best_sel, self.best = min(found, key=lambda sv: sv[1])
        # E: cutting planes t <= u^T M(omega) u (valid for every omega) shared by all nodes
        _, U0 = np.linalg.eigh(base + F.sum(axis=0))
        self.cuts = Cuts(F, base, [*U0.T, *np.eye(self.n_p)])

    def rank_cap(self, fix: np.ndarray) -> float:
        """Upper bound on rank(M) over the node's completions: rank of the fixed part plus the
        largest sum of block ranks each row admits alone (fractional knapsack, floored), and
        the rank of the span of the fixed part and every free block."""
        a, r, eq = self.rows.node(fix)
        ranks = self.ranks[fix < 0]
        extra = min(-knapsack_min(-ranks, ai, ri, bool(e))[0] for ai, ri, e in zip(a, r, eq))
        fixed_M = self.base + self.F[fix == 1].sum(axis=0)
        span = np.linalg.matrix_rank(np.hstack([fixed_M, *self.F[fix < 0]]))
        fixed = np.linalg.matrix_rank(fixed_M, hermitian=True)
        return float(min(fixed + np.floor(extra + 1e-9), span))

    def gap_of(self, ub: float, lb: float) -> float:
        if not np.isfinite(ub):
            return np.inf
        if self.criterion == "D":
            with np.errstate(over="ignore"):  # inf for a far bound
                return float(np.expm1(max(ub - lb, 0.0)))
        return float(max(ub - lb, 0.0) / abs(ub)) if ub != 0 else 0.0

    def prune_level(self, ub: float) -> float:
        if self.criterion == "D":
            return ub - np.log1p(self.gap_tol)
        return ub / (1 + self.gap_tol)

    def run(self, root: np.ndarray, deadline: float, max_nodes: int) -> tuple[int, float]:
        """Explore nodes until proven, out of time or of nodes: (nodes, proven lower bound)."""
        lb0, w_root = self.relax(root, np.full(self.n_c, 0.5))
        heap: list[tuple[float, int, np.ndarray, np.ndarray]] = [(lb0, 0, root, w_root)]
        counter, n_nodes, pruned = 1, 1, np.inf
        while heap:
            if time.perf_counter() > deadline or n_nodes >= max_nodes:
                break
            lb, _, fix, w = heapq.heappop(heap)
            if lb >= self.prune_level(self.best):
                pruned = min(pruned, lb)
                continue
            self.try_rounding(fix, w)
            free = np.flatnonzero(fix < 0)
            if free.size == 0:
                continue
            j = int(free[np.argmin(np.abs(w[free] - 0.5))])
            for value in (1, 0):
                child = fix.copy()
                child[j] = value
                reduced = self.rows.reduce(child)
                if reduced is None:  # no 0/1 point in this branch
                    continue
                clb, cw = self.relax(reduced, w)
                n_nodes += 1
                if clb < self.prune_level(self.best):
                    heapq.heappush(heap, (max(clb, lb), counter, reduced, cw))
                    counter += 1
                else:
                    pruned = min(pruned, max(clb, lb))
        # proven bound: nodes pruned within gap_tol of the incumbent still count
        return n_nodes, min([self.best, pruned] + [h[0] for h in heap])

    def try_rounding(self, fix: np.ndarray, w: np.ndarray) -> None:
        found = self.inc.rounding(fix, w)
        if found is not None and found[1] < self.best:
            self.best_sel, self.best = found

    def relax(self, fix: np.ndarray, w0: np.ndarray) -> tuple[float, np.ndarray]:
        """Lower bound and relaxed point at a (reduced) node (fix: -1 free, 0, 1)."""
        free = fix < 0
        w = (fix == 1).astype(float)
        if not free.any():
            return self.obj.value(w), w
        if self.rank_cap(fix) < self.n_p:  # no completion identifies the parameters
            return np.inf, w
        rows = self.rows.node(fix)
        if self.criterion == "E":
            level = self.prune_level(self.best)
            return relax_e(self.cuts, w, w0, free, rows, level, self.gap_tol, E_START_CUTS)
        return relax_smooth(self.obj, w, w0, free, rows, self.enough)

    def enough(self, value: float, bound: float) -> bool:
        """A relaxation is solved well enough once its node is pruned or its bound is within
        a quarter of the gap tolerance of its value."""
        return bound >= self.prune_level(self.best) or self.gap_of(value, bound) <= self.gap_tol / 4

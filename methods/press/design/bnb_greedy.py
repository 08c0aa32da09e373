"""Incumbents for ``methods.press.design.bnb``: greedy elimination and addition, exchange, rounding.

Every move is evaluated in a batch: the information of a neighbour is ``M(sel) - F_removed +
F_added`` (index -1 = nothing, a zero block), its criterion one batched eigen-decomposition,
its resources ``a @ sel - a_removed + a_added`` checked against every row at once.
"""

from __future__ import annotations

import numpy as np

from methods.press.design.bnb_relax import Objective, Rows


class Incumbents:
    """Heuristic feasible selections and their values (``Objective.value`` of the set)."""

    def __init__(self, F: np.ndarray, base: np.ndarray, obj: Objective, rows: Rows) -> None:
        self.base, self.obj, self.rows = base, obj, rows
        self.n_c, n_p = F.shape[0], F.shape[1]
        self.Fz = np.concatenate([F, np.zeros((1, n_p, n_p))])  # index -1: no block
        self.az = np.c_[rows.a, np.zeros(len(rows.rhs))]
        ridge = 1e-9 * max(np.trace(base + F.sum(axis=0)), 1e-300) / n_p
        self.ridge = Objective(F, base + ridge * np.eye(n_p), "D")  # scores singular sets
        self.fixed_count = bool(rows.eq.any())
        self.seen: set[frozenset[int]] = set()

    def value(self, sel) -> float:
        w = np.zeros(self.n_c)
        w[list(sel)] = 1.0
        return self.obj.value(w)

    def moves(self, sel, rem, add, obj: Objective | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Criterion of ``sel`` without ``rem[k]`` and with ``add[k]`` (-1: none) for each k,
        and whether that neighbour satisfies every row."""
        M = self.base + self.Fz[list(sel)].sum(axis=0)
        vals = (obj or self.obj).values(M - self.Fz[rem] + self.Fz[add])
        used = self.az[:, list(sel)].sum(axis=1)[:, None] - self.az[:, rem] + self.az[:, add]
        return vals, self.rows.fit_columns(used)

    def backward(self) -> list[int]:
        """From all candidates, drop the one that raises the criterion least per unit of the
        violated rows' excess it frees, until every row holds (as <=)."""
        a, rhs, tol = self.rows.a, self.rows.rhs, self.rows.tol
        sel = list(range(self.n_c))
        cur = self.value(sel)
        while True:
            used = a[:, sel].sum(axis=1)
            over = used > rhs + tol
            if not over.any():
                return sel
            weight = (a[over][:, sel] / (used - rhs)[over, None]).sum(axis=0)
            vals, _ = self.moves(sel, np.array(sel), np.full(len(sel), -1))
            delta = vals - cur if np.isfinite(cur) else vals
            i = int(np.argmin(delta / np.maximum(weight, 1e-300)))
            cur = vals[i]
            sel.pop(i)

    def forward(self) -> list[int]:
        """From nothing, add the candidate with the best improvement per resource used (sum of
        a_i / rhs_i) that leaves a feasible completion; a ridged log det scores the additions
        while the set is singular."""
        rows = self.rows
        weight = (rows.a / np.maximum(rows.rhs, 1e-300)[:, None]).sum(axis=0)
        sel: list[int] = []
        while True:
            cand = [c for c in range(self.n_c) if c not in sel and rows.completable([*sel, c])]
            if not cand:
                return sel
            obj = self.obj if np.isfinite(self.value(sel)) else self.ridge
            cur = obj.values((self.base + self.Fz[sel].sum(axis=0))[None])[0]
            vals, _ = self.moves(sel, np.full(len(cand), -1), np.array(cand), obj)
            gain = np.full(vals.size, -np.inf)
            gain[np.isfinite(vals)] = cur - vals[np.isfinite(vals)]
            i = int(np.argmax(gain / np.maximum(weight[cand], 1e-300)))
            if gain[i] <= 0 and not self.fixed_count:
                return sel
            sel.append(cand[i])

    def exchange(self, sel) -> tuple[list[int], float]:
        """Best-improvement local search over additions, swaps and removals (only swaps for an
        exact count) that keep every row, until none improves; infeasible start: value inf."""
        sel = sorted(int(c) for c in sel)
        cur = self.value(sel) if self.rows.fits(sel) else np.inf
        while True:
            ins = np.array(sel, dtype=int)
            out = np.setdiff1d(np.arange(self.n_c), ins)
            rem, add = np.repeat(ins, out.size), np.tile(out, ins.size)
            if not self.fixed_count:
                rem = np.r_[np.full(out.size, -1), rem, ins]
                add = np.r_[out, add, np.full(ins.size, -1)]
            vals, ok = self.moves(sel, rem, add)
            vals = np.where(ok, vals, np.inf)
            if vals.size == 0:
                return sel, cur
            k = int(np.argmin(vals))
            if not np.isfinite(vals[k]):  # no feasible neighbour identifies the parameters
                return sel, cur
            trial = sorted(set(sel) - {int(rem[k])} | ({int(add[k])} - {-1}))
            v = self.value(trial)  # the canonical value of the set
            if not (v < cur - 1e-12 * abs(cur) or (not np.isfinite(cur) and np.isfinite(v))):
                return sel, cur
            sel, cur = trial, v

    def rounding(self, fix: np.ndarray, w: np.ndarray) -> tuple[list[int], float] | None:
        """The relaxation rounded (candidates by decreasing weight while a feasible completion
        remains; fixed ones first, excluded ones never), improved by exchange; None when that
        start was improved before."""
        order = np.argsort(-np.where(fix == 0, -1.0, w + (fix == 1)))
        sel: list[int] = []
        for c in order[: int((fix != 0).sum())]:
            if self.rows.completable([*sel, c]):
                sel.append(int(c))
        key = frozenset(sel)
        if key in self.seen:
            return None
        self.seen.add(key)
        return self.exchange(sel)

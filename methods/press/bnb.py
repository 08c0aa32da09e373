"""Branch-and-bound for choosing ``n_select`` of many candidate sensors (first-order design).

Information ``M(omega) = base + sum_c omega_c F_c`` (F_c: (n_p, n_p) PSD per candidate), design
``C = M^-1``; criteria ``A = tr C``, ``D = log det C = -log det M``, ``E = lambda_max(C) =
1 / lambda_min(M)`` are convex in ``omega``. At each node (some omega fixed to 0 or 1) the
relaxation ``omega in [0, 1], sum omega = n_select`` is solved approximately: A and D by
SLSQP with analytic gradients, whose VALID lower bound comes from convexity at the point
reached,

    f* >= f(w) + min_{s in node polytope} grad f(w)^T (s - w)      (Frank-Wolfe bound),

whose inner minimum is closed-form (take the n_free smallest gradient entries); E by Kelley's
cutting planes on the concave ``lambda_min(M(omega))``: the LP ``max t, t <= u_i^T M(omega)
u_i`` over the cuts ``u_i`` (eigenvectors met so far, shared by all nodes) over-estimates the
relaxed ``lambda_min``, so ``1/t`` is a valid lower bound at every iteration. Incumbents: greedy backward elimination, then pairwise exchange, and the
rounded relaxation of each node. Gap: ``(UB - LB)/UB`` for A and E; ``exp(UB - LB) - 1`` for
D (relative gap in det C).
"""

from __future__ import annotations

import heapq
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from methods.errors import InputError


@dataclass(frozen=True)
class DesignResult:
    """``selected`` candidate indices (sorted); ``value`` criterion of that design;
    ``bound`` proven lower bound on the optimum; ``gap`` (see module doc); ``proven`` (gap
    <= gap_tol); ``n_nodes``; ``seconds``; ``criterion``."""

    selected: tuple[int, ...]
    value: float
    bound: float
    gap: float
    proven: bool
    n_nodes: int
    seconds: float
    criterion: str

    def summary(self) -> str:
        return (
            f"{self.criterion}-design {list(self.selected)}: value {self.value:.6g}, bound "
            f"{self.bound:.6g}, gap {self.gap:.2e} ({'proven' if self.proven else 'not proven'}),"
            f" {self.n_nodes} nodes, {self.seconds:.1f} s"
        )

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["selected"] = [int(i) for i in self.selected]
        d = {k: (float(v) if isinstance(v, np.floating) else v) for k, v in d.items()}
        json.dumps(d)
        return d


class _Objective:
    def __init__(self, F: np.ndarray, base: np.ndarray, criterion: str, smooth: float) -> None:
        self.F, self.base, self.crit, self.smooth = F, base, criterion, smooth
        self.n_p = F.shape[1]

    def value(self, w: np.ndarray) -> float:
        M = self.base + np.tensordot(w, self.F, axes=1)
        ev = np.linalg.eigvalsh(M)
        if ev[0] <= 1e-12 * max(ev[-1], 1e-300):
            return np.inf
        if self.crit == "A":
            return float(np.sum(1.0 / ev))
        if self.crit == "D":
            return float(-np.sum(np.log(ev)))
        return float(1.0 / ev[0])

    def smooth_value_grad(self, w: np.ndarray, beta: float | None) -> tuple[float, np.ndarray]:
        M = self.base + np.tensordot(w, self.F, axes=1)
        ev, U = np.linalg.eigh(M)
        if ev[0] <= 1e-12 * max(ev[-1], 1e-300):
            return np.inf, np.zeros_like(w)
        # uFu[c, i] = u_i^T F_c u_i
        uFu = np.einsum("pi,cpq,qi->ci", U, self.F, U)
        mu = 1.0 / ev
        if self.crit == "A":
            return float(mu.sum()), -(uFu * mu**2).sum(axis=1)
        if self.crit == "D":
            return float(-np.log(ev).sum()), -(uFu * mu).sum(axis=1)
        b = beta if beta is not None else self.smooth / mu.max()
        z = b * mu
        zmax = z.max()
        p = np.exp(z - zmax)
        val = (zmax + np.log(p.sum())) / b
        p /= p.sum()
        return float(val), -(uFu * (p * mu**2)).sum(axis=1)


def _fw_bound(f: float, g: np.ndarray, w: np.ndarray, free: np.ndarray, k_free: int) -> float:
    """min over the node polytope of the linearisation at w (valid lower bound if convex)."""
    gf = g[free]
    s = np.zeros_like(gf)
    s[np.argsort(gf, kind="stable")[:k_free]] = 1.0
    return float(f + gf @ (s - w[free]))


def branch_and_bound(
    fisher_blocks: np.ndarray,
    n_select: int,
    criterion: str = "D",
    *,
    base: np.ndarray | None = None,
    gap_tol: float = 1e-3,
    time_limit: float = 60.0,
    max_nodes: int = 20000,
) -> DesignResult:
    """Choose ``n_select`` of the candidates with information blocks ``fisher_blocks``
    (n_c, n_p, n_p), minimising the criterion of ``(base + sum F_c)^-1``; see module doc."""
    F = np.asarray(fisher_blocks, dtype=float)
    if F.ndim != 3 or F.shape[1] != F.shape[2]:
        raise InputError(f"fisher_blocks must have shape (n_c, n_p, n_p), got {F.shape}")
    criterion = str(getattr(criterion, "value", criterion))
    if criterion not in ("A", "D", "E"):
        raise InputError(f"criterion must be one of ['A', 'D', 'E'], got {criterion!r}")
    n_c, n_p = F.shape[0], F.shape[1]
    if not 1 <= n_select <= n_c:
        raise InputError(f"n_select must lie in 1..{n_c}, got {n_select}")
    base = np.zeros((n_p, n_p)) if base is None else np.asarray(base, float)
    t0 = time.perf_counter()
    search = _Search(0.5 * (F + F.transpose(0, 2, 1)), base, criterion, n_select, gap_tol)
    n_nodes, bound = search.run(t0 + time_limit, max_nodes)
    gap = search.gap_of(search.best, bound)
    return DesignResult(
        tuple(sorted(int(i) for i in search.best_sel)), float(search.best), float(bound), gap,
        bool(gap <= gap_tol * (1 + 1e-9)), n_nodes, time.perf_counter() - t0, criterion,
    )  # fmt: skip


class _Search:
    """Best-first branch-and-bound over 0/1 fixings; ``best``/``best_sel`` is the incumbent."""

    def __init__(self, F, base, criterion: str, n_select: int, gap_tol: float) -> None:
        self.F, self.base, self.criterion = F, base, criterion
        self.n_c, self.n_p = F.shape[0], F.shape[1]
        self.n_select, self.gap_tol = n_select, gap_tol
        # smoothing of E: the bound loses log(n_p)/beta = 2e-4 * lambda_max(C) at most
        self.obj = _Objective(F, base, criterion, smooth=np.log(self.n_p) / 2e-4)
        # incumbent: backward elimination, then pairwise exchange
        sel = list(range(self.n_c))
        while len(sel) > n_select:
            vals = [self.subset_value(sel[:i] + sel[i + 1 :]) for i in range(len(sel))]
            sel.pop(int(np.argmin(vals)))
        self.best_sel, self.best = _exchange(sel, self.n_c, self.subset_value)
        # E: cutting planes t <= u^T M(omega) u (valid for every omega) shared by all nodes
        _, U0 = np.linalg.eigh(base + F.sum(axis=0))
        eye = np.eye(self.n_p)
        self.cuts = [U0[:, i] for i in range(self.n_p)] + [eye[i] for i in range(self.n_p)]

    def subset_value(self, sel) -> float:
        w = np.zeros(self.n_c)
        w[list(sel)] = 1.0
        return self.obj.value(w)

    def gap_of(self, ub: float, lb: float) -> float:
        if not np.isfinite(ub):
            return np.inf
        if self.criterion == "D":
            return float(np.expm1(max(ub - lb, 0.0)))
        return float(max(ub - lb, 0.0) / abs(ub)) if ub != 0 else 0.0

    def prune_level(self, ub: float) -> float:
        if self.criterion == "D":
            return ub - np.log1p(self.gap_tol)
        return ub / (1 + self.gap_tol)

    def run(self, deadline: float, max_nodes: int) -> tuple[int, float]:
        """Explore nodes until proven, out of time or of nodes: (nodes, proven lower bound)."""
        n_c, n_select = self.n_c, self.n_select
        root_fix = -np.ones(n_c, dtype=int)
        lb0, w_root = self.relax(root_fix, np.full(n_c, n_select / n_c))
        heap: list[tuple[float, int, np.ndarray, np.ndarray]] = [(lb0, 0, root_fix, w_root)]
        counter, n_nodes, pruned = 1, 1, np.inf
        while heap:
            if time.perf_counter() > deadline or n_nodes >= max_nodes:
                break
            lb, _, fix, w = heapq.heappop(heap)
            if lb >= self.prune_level(self.best):
                pruned = min(pruned, lb)
                continue
            # incumbent from rounding the relaxation, improved by exchange
            cand = list(np.argsort(-np.where(fix == 0, -1.0, w + (fix == 1)))[:n_select])
            cand_sel, cand_val = _exchange(cand, n_c, self.subset_value)
            if cand_val < self.best:
                self.best_sel, self.best = cand_sel, cand_val
            free = np.flatnonzero(fix < 0)
            if free.size == 0:
                continue
            j = int(free[np.argmin(np.abs(w[free] - 0.5))])
            for value in (1, 0):
                child = fix.copy()
                child[j] = value
                clb, cw = self.relax(child, w)
                n_nodes += 1
                if clb < self.prune_level(self.best):
                    heapq.heappush(heap, (max(clb, lb), counter, child, cw))
                    counter += 1
                else:
                    pruned = min(pruned, max(clb, lb))
        # proven bound: nodes pruned within gap_tol of the incumbent still count
        return n_nodes, min([self.best, pruned] + [h[0] for h in heap])

    def relax(self, fix: np.ndarray, w0: np.ndarray) -> tuple[float, np.ndarray]:
        """Lower bound and relaxed point at a node (fix: -1 free, 0, 1)."""
        free = fix < 0
        k_free = self.n_select - int((fix == 1).sum())
        if k_free < 0 or k_free > free.sum():
            return np.inf, w0
        w = np.where(free, 0.0, fix.astype(float))
        if k_free == 0 or k_free == free.sum():
            w[free] = 1.0 if k_free else 0.0
            return self.obj.value(w), w
        if self.criterion == "E":
            return self.relax_e(w, free, k_free)
        return self.relax_smooth(w, w0, free, k_free)

    def relax_smooth(self, w, w0, free, k_free: int) -> tuple[float, np.ndarray]:
        """A and D (convex): SLSQP on the simplex slice, Frank-Wolfe bound at its point."""
        obj, n_free = self.obj, int(free.sum())
        x0 = np.clip(w0[free], 0, 1)
        x0 = x0 * (k_free / x0.sum()) if x0.sum() > 0 else np.full(n_free, k_free / n_free)
        x0 = np.clip(x0, 0, 1)
        mu_ref = obj.value(np.where(free, k_free / n_free, w))
        beta = obj.smooth / mu_ref if np.isfinite(mu_ref) and self.criterion == "E" else None

        def fg(x):
            ww = w.copy()
            ww[free] = x
            v, g = obj.smooth_value_grad(ww, beta)
            if not np.isfinite(v):
                return 1e300, np.zeros_like(x)
            return v, g[free]

        res = optimize.minimize(
            fg, x0, jac=True, method="SLSQP", bounds=[(0, 1)] * n_free,
            constraints=[{"type": "eq", "fun": lambda x: x.sum() - k_free,
                          "jac": lambda x: np.ones_like(x)}],
            options={"maxiter": 200, "ftol": 1e-12},
        )  # fmt: skip
        ww = w.copy()
        ww[free] = _project_sum(np.clip(res.x, 0, 1), k_free)
        v, g = obj.smooth_value_grad(ww, beta)
        if not np.isfinite(v):
            return -np.inf, ww
        lb = _fw_bound(v, g, ww, free, k_free)
        if self.criterion == "E" and beta is not None:
            lb -= np.log(self.n_p) / beta
        return lb, ww

    def relax_e(self, w: np.ndarray, free: np.ndarray, k_free: int) -> tuple[float, np.ndarray]:
        """max_omega lambda_min(M(omega)) by Kelley's cutting planes (LP, HiGHS): the LP value
        t* bounds lambda_min from above, so 1/t* is a valid lower bound on E."""
        F, cuts, nf = self.F, self.cuts, int(free.sum())
        fixed_M = self.base + np.tensordot(w, F, axes=1)
        ww = w.copy()
        lb = -np.inf
        for _ in range(60):
            Uc = np.array(cuts)
            a = np.einsum("kp,cpq,kq->kc", Uc, F[free], Uc)
            b = np.einsum("kp,pq,kq->k", Uc, fixed_M, Uc)
            res = optimize.linprog(
                np.r_[np.zeros(nf), -1.0],
                A_ub=np.c_[-a, np.ones(len(cuts))], b_ub=b,
                A_eq=np.r_[np.ones(nf), 0.0][None, :], b_eq=[k_free],
                bounds=[(0, 1)] * nf + [(None, None)], method="highs",
            )  # fmt: skip
            if res.status != 0:
                return -np.inf, ww
            t = res.x[-1]
            ww = w.copy()
            ww[free] = res.x[:nf]
            lb = np.inf if t <= 0 else 1.0 / t
            if lb >= self.prune_level(self.best):
                return lb, ww
            ev, U = np.linalg.eigh(self.base + np.tensordot(ww, F, axes=1))
            if ev[0] >= t * (1 - 0.25 * self.gap_tol):  # relaxation solved well enough
                return lb, ww
            cuts.append(U[:, 0])
            if ev[1] < t:
                cuts.append(U[:, 1])
        return lb, ww


def _project_sum(x: np.ndarray, k: float) -> np.ndarray:
    """Euclidean projection onto {0 <= x <= 1, sum x = k} (bisection on the shift)."""
    lo, hi = -1.0 - x.max(), 1.0 - x.min()
    for _ in range(100):
        t = 0.5 * (lo + hi)
        if np.clip(x + t, 0, 1).sum() > k:
            hi = t
        else:
            lo = t
    return np.clip(x + 0.5 * (lo + hi), 0, 1)


def _exchange(sel, n_c: int, value) -> tuple[list[int], float]:
    """First-improvement pairwise exchange until no swap improves."""
    sel = list(sel)
    cur = value(sel)
    improved = True
    while improved:
        improved = False
        for i in range(len(sel)):
            for c in range(n_c):
                if c in sel:
                    continue
                trial = [*sel[:i], c, *sel[i + 1 :]]
                v = value(trial)
                if v < cur - 1e-12 * abs(cur) or (not np.isfinite(cur) and np.isfinite(v)):
                    sel, cur, improved = trial, v, True
                    break
            if improved:
                break
    return sel, cur

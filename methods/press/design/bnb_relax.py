"""Relaxations behind ``methods.press.design.bnb``: the constraint rows, the criteria, the bounds.

Rows: ``a_i . w <= rhs_i`` (``== rhs_i`` for an exact count) with ``a_i >= 0``: the count row
(ones) first, then the cost row (costs, budget). A node fixes some ``w_c`` to 0 or 1; its relaxed
polytope is ``P = {w_free in [0, 1], a_i . w_free <= r_i}`` with the residuals ``r_i`` left by the
fixed ones. ``linear_min(g)`` is ``min_{s in P} g . s``: for one row a fractional knapsack
(zero-weight items are taken iff ``g < 0``; the others by increasing ``g_c / a_c``, for ``<=``
rows only while ``g_c < 0``, until ``r`` is used, the last one fractionally), which is the exact
LP minimum (substitute ``u_c = a_c s_c``); for two rows the cost row is dualised: every
``lam >= 0`` gives ``knapsack_count(g + lam a_cost) - lam r_cost <= min`` (weak duality), and the
piecewise-linear concave dual is maximised by intersecting its support lines (subgradient
``a_cost . s(lam) - r_cost``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize


class Objective:
    """A = tr C, D = log det C, E = lambda_max(C) of ``C = (base + sum w_c F_c)^-1``; inf when
    the information is singular (lambda_min <= 1e-12 lambda_max)."""

    def __init__(self, F: np.ndarray, base: np.ndarray, criterion: str) -> None:
        self.F, self.base, self.crit = F, base, criterion

    def value(self, w: np.ndarray) -> float:
        return float(self.values((self.base + np.tensordot(w, self.F, axes=1))[None])[0])

    def values(self, M: np.ndarray) -> np.ndarray:
        """The criterion of each information matrix in the stack M (m, n_p, n_p)."""
        ev = np.linalg.eigvalsh(M)
        singular = ev[:, 0] <= 1e-12 * np.maximum(ev[:, -1], 1e-300)
        ev = np.where(singular[:, None], 1.0, ev)
        if self.crit == "A":
            out = np.sum(1.0 / ev, axis=1)
        elif self.crit == "D":
            out = -np.sum(np.log(ev), axis=1)
        else:
            out = 1.0 / ev[:, 0]
        return np.where(singular, np.inf, out)

    def value_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """A or D and its gradient in w (``-u_i^T F_c u_i / ev_i^k`` summed, k = 2 or 1)."""
        ev, U = np.linalg.eigh(self.base + np.tensordot(w, self.F, axes=1))
        if ev[0] <= 1e-12 * max(ev[-1], 1e-300):
            return np.inf, np.zeros_like(w)
        uFu = np.einsum("pi,cpq,qi->ci", U, self.F, U)  # uFu[c, i] = u_i^T F_c u_i
        mu = 1.0 / ev
        if self.crit == "A":
            return float(mu.sum()), -(uFu * mu**2).sum(axis=1)
        return float(-np.log(ev).sum()), -(uFu * mu).sum(axis=1)


@dataclass(frozen=True)
class Rows:
    """Constraints ``a @ w <= rhs`` (``==`` where ``eq``) on the 0/1 choice ``w``, a >= 0."""

    a: np.ndarray  # (n_rows, n_c)
    rhs: np.ndarray
    eq: np.ndarray

    @property
    def tol(self) -> np.ndarray:
        return 1e-9 * np.maximum(np.abs(self.rhs), 1.0)

    def fits(self, sel) -> bool:
        return bool(self.fit_columns(self.a[:, list(sel)].sum(axis=1)[:, None])[0])

    def fit_columns(self, used: np.ndarray) -> np.ndarray:
        """Which columns of ``used`` (n_rows, m: resources of m choices) satisfy every row."""
        tol = self.tol[:, None]
        ok = (used <= self.rhs[:, None] + tol) & (
            ~self.eq[:, None] | (used >= self.rhs[:, None] - tol)
        )
        return np.all(ok, axis=0)

    def completable(self, sel) -> bool:
        """Some 0/1 choice containing ``sel`` satisfies every row (exact for the count row,
        the cost row and both: the cheapest completion is the LP's)."""
        fix = -np.ones(self.a.shape[1], dtype=int)
        fix[list(sel)] = 1
        return self.reduce(fix) is not None

    def node(self, fix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows on the free candidates with their residual right-hand sides."""
        return self.a[:, fix < 0], self.rhs - self.a[:, fix == 1].sum(axis=1), self.eq

    def reduce(self, fix: np.ndarray) -> np.ndarray | None:
        """Fix what every feasible completion fixes (a free candidate that cannot fit -> 0; an
        exact row that needs every free one -> 1); None when the node has no 0/1 point."""
        fix = fix.copy()
        tol = self.tol
        while True:
            a, r, eq = self.node(fix)
            if np.any(r < -tol) or np.any(a.sum(axis=1)[eq] < r[eq] - tol[eq]):
                return None
            out = np.any(a > r[:, None] + tol[:, None], axis=0)
            if out.any():
                fix[np.flatnonzero(fix < 0)[out]] = 0
                continue
            if a.shape[1] and np.any(eq & (a.sum(axis=1) <= r + tol)):
                fix[fix < 0] = 1
                continue
            for i in np.flatnonzero(eq):  # a <= row must admit a point of the exact row
                for j in np.flatnonzero(~eq):
                    if knapsack_min(a[j], a[i], r[i], True)[0] > r[j] + tol[j]:
                        return None
            return fix


def knapsack_min(g: np.ndarray, a: np.ndarray, r: float, eq: bool) -> tuple[float, np.ndarray]:
    """``min g . s`` over ``0 <= s <= 1, a . s <= r`` (``== r`` if eq), ``a >= 0``; exact."""
    s = np.zeros_like(g, dtype=float)
    zero = a <= 0
    s[zero & (g < 0)] = 1.0
    idx = np.flatnonzero(~zero)
    order = idx[np.argsort(g[idx] / a[idx], kind="stable")]
    if not eq:
        order = order[g[order] < 0]
    cum = np.cumsum(a[order])
    n_full = int(np.searchsorted(cum, r, side="right"))
    s[order[:n_full]] = 1.0
    if n_full < order.size:
        rest = r - (cum[n_full - 1] if n_full else 0.0)
        s[order[n_full]] = min(max(rest / a[order[n_full]], 0.0), 1.0)
    return float(g @ s), s


def linear_min(g: np.ndarray, a: np.ndarray, r: np.ndarray, eq: np.ndarray) -> float:
    """A valid lower bound on (for one row: exactly) ``min g . s`` over the node polytope."""
    if len(r) == 1:
        return knapsack_min(g, a[0], r[0], bool(eq[0]))[0]

    def dual(lam: float) -> tuple[float, float]:  # value and subgradient of the dual
        v, s = knapsack_min(g + lam * a[1], a[0], r[0], bool(eq[0]))
        return v - lam * r[1], float(a[1] @ s - r[1])

    lo, (f_lo, s_lo) = 0.0, dual(0.0)
    if s_lo <= 0:  # the cost row is not binding: lam = 0 is optimal
        return f_lo
    hi = (np.abs(g).max() + 1e-300) / max(a[1].max(), 1e-300)
    f_hi, s_hi = dual(hi)
    for _ in range(200):
        if s_hi <= 0:
            break
        lo, f_lo, s_lo, hi = hi, f_hi, s_hi, 2 * hi
        f_hi, s_hi = dual(hi)
    best, tol = max(f_lo, f_hi), 1e-12 * (np.abs(g).sum() + 1e-300)
    for _ in range(100):  # the piecewise-linear concave dual: intersect the support lines
        lam = (f_hi - f_lo + s_lo * lo - s_hi * hi) / (s_lo - s_hi)
        if s_hi > 0 or f_lo + s_lo * (lam - lo) <= best + tol:
            break
        f, sub = dual(min(max(lam, lo), hi))
        best = max(best, f)
        if sub > 0:
            lo, f_lo, s_lo = lam, f, sub
        else:
            hi, f_hi, s_hi = lam, f, sub
    return best


def _start(x: np.ndarray, a: np.ndarray, r: np.ndarray, eq: np.ndarray) -> np.ndarray:
    """A starting point for SLSQP: x scaled onto each exact row, down into each <= row."""
    x = np.clip(x, 0, 1)
    if x.sum() <= 0:
        x = np.full(x.size, 0.5)
    for ai, ri, e in zip(a, r, eq):
        used = ai @ x
        if used > 0:
            x = np.clip(x * (ri / used if e else min(ri / used, 1.0)), 0, 1)
    return x


def relax_smooth(obj: Objective, w, w0, free, rows, enough) -> tuple[float, np.ndarray]:
    """A and D (convex): SLSQP on the node polytope. The Frank-Wolfe bound at a point x,
    ``f(x) + min_{s in P} g . s - g . x``, is valid for ANY x with finite f: the best one over
    the iterates is returned; SLSQP stops once ``enough(f(x), bound)`` (node pruned, or the
    relaxation solved well enough for the gap)."""
    a, r, eq = rows
    best = [-np.inf]

    def fw_bound(x: np.ndarray) -> tuple[float, float]:
        ww = w.copy()
        ww[free] = x
        v, g = obj.value_grad(ww)
        if not np.isfinite(v):
            return -np.inf, v
        best[0] = max(best[0], float(v + linear_min(g[free], a, r, eq) - g[free] @ x))
        return best[0], v

    def fg(x):
        ww = w.copy()
        ww[free] = x
        v, g = obj.value_grad(ww)
        return (1e300, np.zeros_like(x)) if not np.isfinite(v) else (v, g[free])

    def stop(xk):
        lb, v = fw_bound(np.clip(xk, 0, 1))
        if np.isfinite(lb) and enough(v, lb):
            raise StopIteration

    cons = [
        {"type": "eq" if e else "ineq", "fun": (lambda x, ai=ai, ri=ri, s=1 - 2 * e: s * (ri - ai @ x)),
         "jac": (lambda x, ai=ai, s=1 - 2 * e: -s * ai)}
        for ai, ri, e in zip(a, r, eq)
    ]  # fmt: skip
    x0 = _start(w0[free], a, r, eq)
    res = optimize.minimize(
        fg, x0, jac=True, method="SLSQP", bounds=[(0, 1)] * x0.size, constraints=cons,
        callback=stop, options={"maxiter": 200, "ftol": 1e-12},
    )  # fmt: skip
    x = np.clip(res.x, 0, 1)
    if len(r) == 1 and eq[0]:
        x = _project_sum(x, r[0])
    elif not eq.any():
        x = x * min(1.0, *(ri / max(ai @ x, 1e-300) for ai, ri in zip(a, r)))
    fw_bound(x)
    ww = w.copy()
    ww[free] = x
    return best[0], ww


class Cuts:
    """Valid cuts ``lambda_min(M(w)) <= u^T M(w) u`` (unit u) for E, shared by all nodes, with
    ``A[k, c] = u_k^T F_c u_k`` and ``b[k] = u_k^T base u_k`` cached."""

    def __init__(self, F: np.ndarray, base: np.ndarray, vectors) -> None:
        self.F, self.base = F, base
        self.A, self.b = np.empty((0, F.shape[0])), np.empty(0)
        for u in vectors:
            self.add(u)

    def add(self, u: np.ndarray) -> int:
        self.A = np.vstack([self.A, np.einsum("p,cpq,q->c", u, self.F, u)])
        self.b = np.r_[self.b, u @ self.base @ u]
        return len(self.b) - 1


def relax_e(cuts: Cuts, w, w0, free, rows, prune: float, tol: float, n_start: int):
    """max_w lambda_min(M(w)) over the node polytope by Kelley's cutting planes (LP, HiGHS):
    the LP over ANY set of cuts over-estimates lambda_min, so 1/t* is a valid lower bound on
    E at every iteration. Starts from the ``n_start`` cuts tightest at the parent's point."""
    a, r, eq = rows
    nf = int(free.sum())
    ww, lb = w.copy(), -np.inf
    rows_ub = np.c_[a[~eq], np.zeros((int((~eq).sum()), 1))]
    a_eq = np.c_[a[eq], np.zeros((int(eq.sum()), 1))] if eq.any() else None
    at_parent = cuts.b + cuts.A @ np.where(free, np.clip(w0, 0, 1), w)
    local = list(np.argsort(at_parent)[:n_start])
    for _ in range(60):
        ac, bc = cuts.A[local][:, free], cuts.b[local] + cuts.A[local] @ w
        res = optimize.linprog(
            np.r_[np.zeros(nf), -1.0],
            A_ub=np.r_[np.c_[-ac, np.ones(len(local))], rows_ub], b_ub=np.r_[bc, r[~eq]],
            A_eq=a_eq, b_eq=r[eq] if eq.any() else None,
            bounds=[(0, 1)] * nf + [(None, None)], method="highs",
        )  # fmt: skip
        if res.status != 0:
            return -np.inf, ww
        t = res.x[-1]
        ww = w.copy()
        ww[free] = res.x[:nf]
        lb = np.inf if t <= 0 else 1.0 / t
        if lb >= prune:
            return lb, ww
        ev, U = np.linalg.eigh(cuts.base + np.tensordot(ww, cuts.F, axes=1))
        if ev[0] >= t * (1 - 0.25 * tol):  # relaxation solved well enough
            return lb, ww
        local += [cuts.add(U[:, i]) for i in range(len(ev)) if ev[i] < t]
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

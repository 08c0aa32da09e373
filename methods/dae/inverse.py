"""High-level entry point: ``solve_inverse(problem, demand, method=..., dt=...)``.

1. Check the demand (names, smoothness against ``problem.demand_order``).
2. Consistent start: the steady state on the trajectory at ``t_start`` (rest, or constant
   velocity for ships/aircraft), from ``Phi(q) = gamma``, ``C_v v = gamma'``, ``f - d - B^T u = 0``
   (``v' = 0``), ``xi = 0``, solved by Gauss-Newton with minimum-norm steps from the nominal state.
3. Partition (QR with pivoting), compile the scheme (cached per problem, method, step size,
   partition), march in chunks; re-partition when ``cond(W)`` degrades; check bounds.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from typing import Literal, NoReturn

import casadi as ca
import numpy as np
import pandas as pd

from methods.dae.demand import Demand, parse_demand
from methods.dae.problem import InverseProblemError, ServoProblem
from methods.dae.projection import COND_REPIVOT, Partition, choose_partition, projected_parts
from methods.dae.result import InverseResult
from methods.dae.solvers import Method, compile_scheme, newton_step
from methods.dae.start import _cache, consistent_start
from methods.errors import InputError

__all__ = ["DemandSmoothnessWarning", "consistent_start", "solve_inverse"]

# why a chunk stops early: a coordinate bound (index, lo, hi) or cond(W) over the limit
_Stop = tuple[Literal["bound"], int, float, float] | tuple[Literal["cond"], None, None, None]


class DemandSmoothnessWarning(UserWarning):
    """The demand is less smooth than the controls need (they will jump)."""


def _check_smoothness(pb: ServoProblem, demand: Demand) -> list[str]:
    msgs = []
    need = pb.demand_order
    for name, (r, tj) in demand.continuity().items():
        if r >= need:
            continue
        at = f" at t = {tj:g} s" if tj is not None else ""
        if r < need - 1:
            raise InverseProblemError(
                f"demand for {name!r} is too rough{at}: it is only C^{int(r)} but the controls of "
                f"{pb.name!r} need derivative {need} of the demand (C^{need - 1} at least, C^{need} "
                f"for continuous controls): the controls would be impulsive. Use smooth steps of "
                f"degree >= {2 * need + 1}.",
                time=tj,
            )
        msg = (
            f"demand for {name!r} is C^{int(r)}{at}, but {pb.name!r} needs derivative {need}: "
            f"the exact controls jump there. Use smooth steps of degree >= {2 * need + 1}."
        )
        warnings.warn(msg, DemandSmoothnessWarning, stacklevel=3)
        msgs.append(msg)
    return msgs


_JIT_WORK = 2e7  # steps x instructions above which C compilation pays for itself


def _scheme(pb, method, dt, partition, tol, chunk_len, jit, n_steps):
    """Compiled scheme, cached per problem, method, step size, partition (and jit)."""
    cache = _cache(pb)
    base = (method, dt, partition.dependent, tol, chunk_len)
    if (*base, False) not in cache:
        parts = projected_parts(pb, partition)
        cache[(*base, False)] = compile_scheme(
            method, parts, pb.n, pb.m, dt, tol=tol, chunk_len=chunk_len
        )
    vm = cache[(*base, False)]
    if jit is None:
        jit = n_steps * vm.rj.n_instructions() > _JIT_WORK
    if not jit:
        return vm
    if (*base, True) not in cache:
        parts = projected_parts(pb, partition)
        try:
            cache[(*base, True)] = compile_scheme(
                method, parts, pb.n, pb.m, dt, tol=tol, chunk_len=chunk_len, jit=True
            )
        except Exception as exc:  # no C compiler: the virtual machine is correct, only slower
            warnings.warn(
                f"JIT compilation failed ({exc}); using the CasADi VM", RuntimeWarning, stacklevel=3
            )
            cache[(*base, True)] = vm
    return cache[(*base, True)]


def _cond_W(pb: ServoProblem, Q: np.ndarray, V: np.ndarray, part: Partition) -> np.ndarray:
    cache = _cache(pb)
    L = Q.shape[1]
    key = ("Cv_map", L)
    if key not in cache:
        cache[key] = ca.Function("Cv", [pb.q, pb.v], [ca.vec(pb.Cv)]).map(L)
    Cv = np.asarray(cache[key](Q, V)).reshape(pb.n, pb.m, L).transpose(2, 1, 0)  # (L, m, n)
    W = Cv[:, :, list(part.dependent)]
    with np.errstate(all="ignore"):
        return np.linalg.cond(W)


def solve_inverse(
    problem: ServoProblem,
    demand: Demand | Mapping,
    *,
    method: Method | str = Method.EULER,
    dt: float = 1e-3,
    t_end: float | None = None,
    tol: float = 1e-10,
    chunk_len: int = 500,
    jit: bool | None = None,
    strict_rank: bool = False,
) -> InverseResult:
    """Solve the inverse dynamics of ``problem`` for ``demand`` on ``[t_start, t_end]``.

    ``method``: euler (the paper), bdf2, radau (3-stage Radau IIA), all with fixed step ``dt``
    (s). ``tol``: Newton tolerance on the index-weighted increments (see ``solvers``). Raises
    :class:`InverseProblemError` (an ``InputError``, with ``.time``) for infeasible or too rough
    demands, singular partitions and Newton failures. ``jit``: compile the solver to C (None:
    automatically for long runs of large models; compile time is reported separately).
    ``strict_rank``: ``p != 2m - n`` at the start is an error, not a warning (a lab's system).
    """
    pb = problem
    meth, demand, t0, n_steps = _checked_inputs(pb, demand, method, dt, t_end)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        msgs = _check_smoothness(pb, demand)
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=2)

    q0, v0, u0 = consistent_start(pb, demand, t0)
    rank_info = pb.rank_at(q0, v0, f"start t = {t0:g} s")
    if rank_info.p != rank_info.p_expected:  # docs/methods.md 3.2: p = 2m - n expected
        if strict_rank:
            _unreachable(pb, rank_info, t0)
        msg = f"p = rank(C M^-1 B^T) differs from 2m - n: {rank_info.summary()}"
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        msgs.append(msg)
    march = _March(pb, meth, float(dt), tol, chunk_len, jit, n_steps, t0)
    march.start(q0, v0, u0, _stage_parameters(pb, demand, meth, march.h, t0, n_steps + chunk_len))
    march.run()
    h = march.h
    t = t0 + h * np.arange(n_steps + 1)
    Y, n = march.Y, pb.n
    Q, V, U = Y[:n], Y[n : 2 * n] / h, Y[2 * n :] / h**2
    V[:, 0], U[:, 0] = v0, u0
    phi = np.asarray(ca.Function("phi", [pb.q], [pb.Phi]).map(n_steps + 1)(Q))
    gam = demand.evaluate(pb.output_names, t, 0)[0]
    cols = {"t_s": t}
    for names, arr in ((pb.coordinate_names, Q), (pb.velocity_names, V), (pb.control_names, U)):
        cols.update({nm: arr[i] for i, nm in enumerate(names)})
    return InverseResult(
        problem_name=pb.name,
        method=meth.value,
        dt=h,
        table=pd.DataFrame(cols),
        output_names=pb.output_names,
        control_names=pb.control_names,
        max_constraint_violation=float(np.max(np.abs(phi - gam))),
        newton_iterations_total=int(march.iters.sum()),
        newton_iterations_max=int(march.iters.max()),
        wall_time_s=march.wall_time,
        compile_time_s=march.compile_time,
        rank_info=rank_info,
        partitions=tuple(march.partitions),
        warnings=tuple(msgs),
        demand=demand,
    )


def _checked_inputs(
    pb: ServoProblem, demand: Demand | Mapping, method: Method | str, dt: float, t_end: float | None
) -> tuple[Method, Demand, float, int]:
    """The parsed method and demand, the start time and the number of steps; or an InputError."""
    if not getattr(pb, "_frozen", False):
        raise InputError(f"problem {pb.name!r} is not set up: call setup() first")
    meth = Method.parse(method)
    if not (isinstance(dt, int | float) and math.isfinite(dt) and dt > 0):
        raise InputError(f"dt must be a positive number of seconds, got {dt!r}")
    if not isinstance(demand, Demand):
        demand = parse_demand(demand, pb.output_names)
    demand.check_names(pb.output_names)
    t0 = demand.t_start
    t_end = t_end if t_end is not None else demand.t_end
    if t_end is None:
        raise InputError("no horizon: give t_end (or t_end in the demand)")
    if not t_end > t0 + dt:
        raise InputError(f"t_end = {t_end} must exceed t_start + dt = {t0 + dt}")
    return meth, demand, t0, round((t_end - t0) / dt)


def _stage_parameters(
    pb: ServoProblem, demand: Demand, meth: Method, h: float, t0: float, n_pad: int
) -> np.ndarray:
    """Per-step solver parameters: stage times, then gamma and gamma'' stage by stage.

    ``n_pad`` steps (the horizon plus one chunk: every chunk may start anywhere).
    """
    cs = meth.stage_times
    ns = len(cs)
    t_grid = t0 + h * np.arange(n_pad + 1)
    ts = (t_grid[:-1, None] + h * cs[None, :]).T  # (ns, n_pad)
    g = demand.evaluate(pb.output_names, ts.ravel(), 2).reshape(3, pb.m, ns, n_pad)
    return np.vstack([ts, *(g[0][:, i, :] for i in range(ns)), *(g[2][:, i, :] for i in range(ns))])


class _March:
    """The chunked march of the compiled scheme, with re-partitioning and bound checks.

    State ``Y`` holds ``(q, h v, h^2 u)`` per step; ``X`` is the current and previous state (the
    schemes are two-step in their start-up form); ``pos`` the last converged step.
    """

    def __init__(self, pb, meth, h, tol, chunk_len, jit, n_steps, t0) -> None:
        self.pb, self.meth, self.h, self.tol = pb, meth, h, tol
        self.chunk_len, self.jit, self.n_steps, self.t0 = chunk_len, jit, n_steps, t0
        self.N = 2 * pb.n + pb.m
        self.bounds = [(pb.coordinate_names.index(k), lo, hi) for k, (lo, hi) in pb.bounds.items()]
        self.cond_limit = COND_REPIVOT
        self.compile_time = 0.0
        self.wall_time = 0.0

    def start(self, q0: np.ndarray, v0: np.ndarray, u0: np.ndarray, P: np.ndarray) -> None:
        pb, h = self.pb, self.h
        self.part = choose_partition(np.asarray(pb.fun_mats(q0, v0)[0]), self.t0)
        self.partitions = [{"t_s": self.t0, **self.part.to_dict()}]
        y0 = np.r_[q0, h * v0, h**2 * u0]
        y_prev = np.r_[q0 - h * np.asarray(pb.fun_ode(q0, v0, u0)[0]).ravel(), h * v0, h**2 * u0]
        self._compile()
        self.P = P
        self.Y = np.empty((self.N, self.n_steps + 1))
        self.Y[:, 0] = y0
        self.iters = np.zeros(self.n_steps + 1, dtype=int)
        self.X = np.r_[y0, y_prev]
        self.pos = 0

    def _compile(self) -> None:
        ct = time.perf_counter()
        self.scheme = _scheme(
            self.pb, self.meth, self.h, self.part, self.tol, self.chunk_len, self.jit, self.n_steps
        )
        self.compile_time += time.perf_counter() - ct

    def run(self) -> None:
        wall = time.perf_counter()
        L, N = self.chunk_len, self.N
        while self.pos < self.n_steps:
            pos = self.pos
            try:
                _, Ys, its, errs = self.scheme.chunk(self.X, self.P[:, pos : pos + L])
                Ys, its, errs = np.asarray(Ys), np.asarray(its).ravel(), np.asarray(errs).ravel()
            except RuntimeError:  # singular Newton matrix somewhere in the chunk: step by step
                Ys, its, errs = np.full((N, 1), np.nan), np.zeros(1), np.full(1, np.inf)
            take = min(self.n_steps - pos, Ys.shape[1])
            bad = ~(errs[:take] <= self.tol) | ~np.isfinite(Ys[:, :take]).all(axis=0)
            jj, kind = self._first_problem(Ys[:, : int(np.argmax(bad)) if bad.any() else take])
            self.Y[:, pos + 1 : pos + 1 + jj] = Ys[:, :jj]
            self.iters[pos + 1 : pos + 1 + jj] = its[:jj]
            if jj > 0:
                self.X = np.r_[Ys[:, jj - 1], self.Y[:, pos + jj - 1]]
            self.pos += jj
            if kind is not None and kind[0] == "bound":
                self._infeasible(kind, Ys[kind[1], jj])
            if kind is not None and kind[0] == "cond":
                self._repartition()
            elif self.pos < self.n_steps and jj != take:
                self._plain_step()
        self.wall_time = time.perf_counter() - wall

    def _first_problem(self, Ys: np.ndarray) -> tuple[int, _Stop | None]:
        """Among converged steps ``Ys``: the first that leaves a bound or has cond(W) too high."""
        j = Ys.shape[1]
        problem_at: int = j
        kind: _Stop | None = None
        if j > 0:
            for idx, lo, hi in self.bounds:
                out = (Ys[idx, :j] <= lo) | (Ys[idx, :j] >= hi)
                if out.any() and int(np.argmax(out)) < problem_at:
                    problem_at, kind = int(np.argmax(out)), ("bound", idx, lo, hi)
            n, h = self.pb.n, self.h
            cw = _cond_W(self.pb, Ys[:n], Ys[n : 2 * n] / h, self.part)
            over = ~(cw <= self.cond_limit)
            if over.any() and int(np.argmax(over)) < problem_at:
                problem_at, kind = int(np.argmax(over)), ("cond", None, None, None)
        return problem_at, kind

    def _infeasible(self, kind: _Stop, value: float) -> NoReturn:
        _, idx, lo, hi = kind
        t = self.t0 + self.pos * self.h + self.h
        raise InverseProblemError(
            f"infeasible demand: coordinate {self.pb.coordinate_names[idx]!r} = {value:.6g} leaves "
            f"its admissible range ({lo:g}, {hi:g}) at t = {t:.6g} s. The demanded motion "
            "cannot be realised by this system (e.g. a slack rope or a load above the "
            "trolley); slow the demand down or change it near this time.",
            time=t,
        )

    def _repartition(self) -> None:
        pb, n, h, pos = self.pb, self.pb.n, self.h, self.pos
        t_now = self.t0 + pos * h
        new = choose_partition(
            np.asarray(pb.fun_mats(self.Y[:n, pos], self.Y[n : 2 * n, pos] / h)[0]), t_now
        )
        if new.dependent == self.part.dependent:
            self.cond_limit = max(self.cond_limit, 100.0 * new.cond)
            return
        self.part, self.cond_limit = new, COND_REPIVOT
        self.partitions.append({"t_s": t_now, **new.to_dict()})
        self._compile()

    def _plain_step(self) -> None:
        """Newton did not converge within the unrolled iterations: retry this step plainly."""
        N, X, pos = self.N, self.X, self.pos
        cs = self.meth.stage_times
        z0 = np.tile(X[:N], len(cs)) + np.concatenate([c * (X[:N] - X[N:]) for c in cs])
        z, it, err = newton_step(self.scheme, X, self.P[:, pos], z0)
        t_next = self.t0 + pos * self.h + self.h
        if z is None:
            _newton_failure(self.pb, self.Y[:, pos], self.h, t_next, it, err)
        self.Y[:, pos + 1] = z[(len(cs) - 1) * N :]
        self.iters[pos + 1] = it
        self.X = np.r_[self.Y[:, pos + 1], self.Y[:, pos]]
        self.pos += 1


def _unreachable(pb: ServoProblem, info, t0: float) -> NoReturn:
    raise InverseProblemError(
        f"{pb.name}: the outputs {list(pb.output_names)} are not reachable by the controls "
        f"{list(pb.control_names)} as servo constraints at t = {t0:g} s: p = rank(C M^-1 B^T) "
        f"= {info.p}, but the method needs 2m - n = {info.p_expected} (n = {info.n} coordinates "
        f"{list(pb.coordinate_names)}, m = {info.m}); choose other outputs or controls",
        time=t0,
    )


def _newton_failure(
    pb: ServoProblem, y: np.ndarray, h: float, t: float, it: int, err: float
) -> NoReturn:
    n = pb.n
    q, v = y[:n], y[n : 2 * n] / h
    Cv = np.asarray(pb.fun_mats(q, v)[0])
    choose_partition(Cv, t)  # raises a "singular partition" error if that is the cause
    raise InverseProblemError(
        f"Newton iteration failed at t = {t:.6g} s ({it} iterations, last weighted increment "
        f"{err:.3g}). The demand may be infeasible or too fast for {pb.name!r} near this time; "
        "try a slower or smoother demand, a smaller dt, or check the parameters.",
        time=t,
    )

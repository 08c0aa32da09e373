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
from methods.errors import InputError

__all__ = ["DemandSmoothnessWarning", "consistent_start", "solve_inverse"]

_START_TOL = 1e-9  # residual of the consistent start (output units / forces scaled by row norm)
_STEADY_TOL = 1e-9  # |gamma''|, |gamma'''|, |gamma''''| at t_start counted as zero

# why a chunk stops early: a coordinate bound (index, lo, hi) or cond(W) over the limit
_Stop = tuple[Literal["bound"], int, float, float] | tuple[Literal["cond"], None, None, None]


class DemandSmoothnessWarning(UserWarning):
    """The demand is less smooth than the controls need (they will jump)."""


def _cache(problem: ServoProblem) -> dict:
    if not hasattr(problem, "_compiled"):
        problem._compiled = {}
    return problem._compiled


def _start_function(pb: ServoProblem) -> ca.Function:
    c = _cache(pb)
    if "start" not in c:
        q, v, u = pb.q, pb.v, pb.u
        g = ca.SX.sym("g", pb.m, 3)
        w = ca.vertcat(q, v, u)
        force = pb.generalized_force()
        r = ca.vertcat(pb.Phi - g[:, 0], ca.mtimes(pb.Cv, v) - g[:, 1], force, g[:, 2] - pb.Cdot_v)
        c["start"] = ca.Function("start", [w, g], [r, ca.jacobian(r, w)])
    return c["start"]


def consistent_start(pb: ServoProblem, demand: Demand, t0: float) -> tuple[np.ndarray, ...]:
    """Steady state ``(q0, v0, u0)`` on the demand at ``t0`` (see module docstring)."""
    gam = demand.evaluate(pb.output_names, np.array([t0]), 4)[:, :, 0]  # (5, m)
    if np.max(np.abs(gam[2:4])) > _STEADY_TOL * max(1.0, np.max(np.abs(gam[:2]))):
        raise InverseProblemError(
            f"demand at t = {t0:g} s is not steady (gamma'' or gamma''' nonzero): the "
            "inverse simulation starts from rest or steady motion; start the demand earlier.",
            time=t0,
        )
    fun = _start_function(pb)
    w = np.r_[pb.q_nominal, pb.v_nominal, np.zeros(pb.m)]
    g = gam[:3].T
    res = np.inf
    for _ in range(50):
        r, J = (np.asarray(x) for x in fun(w, g))
        r = r.ravel()
        s = 1.0 / np.maximum(np.abs(J).sum(axis=1), 1.0)
        res = float(np.max(np.abs(r * s)))
        if res < _START_TOL * 1e-3:
            break
        dw = np.linalg.lstsq(J * s[:, None], r * s, rcond=1e-12)[0]
        w = w - dw
        if np.max(np.abs(dw) / (1 + np.abs(w))) < 1e-14:
            break
    if not res < _START_TOL:
        raise InverseProblemError(
            f"no consistent steady start at t = {t0:g} s (residual {res:.3g}): the demanded "
            "initial output is not an equilibrium reachable from the nominal state; check the "
            "demand's start values and the parameters.",
            time=t0,
        )
    n = pb.n
    return w[:n], w[n : 2 * n], w[2 * n :]


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
) -> InverseResult:
    """Solve the inverse dynamics of ``problem`` for ``demand`` on ``[t_start, t_end]``.

    ``method``: euler (the paper), bdf2, radau (3-stage Radau IIA), all with fixed step ``dt``
    (s). ``tol``: Newton tolerance on the index-weighted increments (see ``solvers``). Raises
    :class:`InverseProblemError` (an ``InputError``, with ``.time``) for infeasible or too rough
    demands, singular partitions and Newton failures. ``jit``: compile the solver to C (None:
    automatically for long runs of large models; compile time is reported separately).
    """
    pb = problem
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
    n_steps = round((t_end - t0) / dt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        msgs = _check_smoothness(pb, demand)
    for w in caught:
        warnings.warn(w.message, w.category, stacklevel=2)

    q0, v0, u0 = consistent_start(pb, demand, t0)
    rank_info = pb.rank_at(q0, v0, f"start t = {t0:g} s")
    part = choose_partition(np.asarray(pb.fun_mats(q0, v0)[0]), t0)
    partitions = [{"t_s": t0, **part.to_dict()}]

    n, m, h = pb.n, pb.m, float(dt)
    N = 2 * n + m
    y0 = np.r_[q0, h * v0, h**2 * u0]
    y_prev = np.r_[q0 - h * np.asarray(pb.fun_ode(q0, v0, u0)[0]).ravel(), h * v0, h**2 * u0]

    ct = time.perf_counter()
    scheme = _scheme(pb, meth, h, part, tol, chunk_len, jit, n_steps)
    compile_time = time.perf_counter() - ct

    # per-step parameters: stage times, gamma and gamma'' at the stage times
    cs = meth.stage_times
    ns = len(cs)
    L = chunk_len
    n_pad = n_steps + L  # parameters for one extra chunk: every chunk may start anywhere
    t_grid = t0 + h * np.arange(n_pad + 1)
    ts = (t_grid[:-1, None] + h * cs[None, :]).T  # (ns, n_pad)
    g = demand.evaluate(pb.output_names, ts.ravel(), 2).reshape(3, m, ns, n_pad)
    # layout of the solver's parameter vector: stage times, gamma and gamma'' stage by stage
    P = np.vstack([ts, *(g[0][:, i, :] for i in range(ns)), *(g[2][:, i, :] for i in range(ns))])

    Y = np.empty((N, n_steps + 1))
    Y[:, 0] = y0
    iters = np.zeros(n_steps + 1, dtype=int)
    X = np.r_[y0, y_prev]
    pos = 0
    cond_limit = COND_REPIVOT
    bounds = [(pb.coordinate_names.index(k), lo, hi) for k, (lo, hi) in pb.bounds.items()]
    wall = time.perf_counter()
    while pos < n_steps:
        try:
            _, Ys, its, errs = scheme.chunk(X, P[:, pos : pos + L])
            Ys, its, errs = np.asarray(Ys), np.asarray(its).ravel(), np.asarray(errs).ravel()
        except RuntimeError:  # singular Newton matrix somewhere in the chunk: go step by step
            Ys, its, errs = np.full((N, 1), np.nan), np.zeros(1), np.full(1, np.inf)
        take = min(n_steps - pos, Ys.shape[1])
        bad = ~(errs[:take] <= tol) | ~np.isfinite(Ys[:, :take]).all(axis=0)
        j = int(np.argmax(bad)) if bad.any() else take
        # bounds and partition conditioning on the converged steps
        problem_at = j
        kind: _Stop | None = None
        if j > 0:
            for idx, lo, hi in bounds:
                out = (Ys[idx, :j] <= lo) | (Ys[idx, :j] >= hi)
                if out.any() and int(np.argmax(out)) < problem_at:
                    problem_at, kind = int(np.argmax(out)), ("bound", idx, lo, hi)
            cw = _cond_W(pb, Ys[:n, :j], Ys[n : 2 * n, :j] / h, part)
            over = ~(cw <= cond_limit)
            if over.any() and int(np.argmax(over)) < problem_at:
                problem_at, kind = int(np.argmax(over)), ("cond", None, None, None)
        jj = problem_at
        Y[:, pos + 1 : pos + 1 + jj] = Ys[:, :jj]
        iters[pos + 1 : pos + 1 + jj] = its[:jj]
        if jj > 0:
            X = np.r_[Ys[:, jj - 1], Y[:, pos + jj - 1]]
        pos += jj
        t_now = t0 + pos * h
        if kind is not None and kind[0] == "bound":
            _, idx, lo, hi = kind
            val = Ys[idx, jj]
            raise InverseProblemError(
                f"infeasible demand: coordinate {pb.coordinate_names[idx]!r} = {val:.6g} leaves its "
                f"admissible range ({lo:g}, {hi:g}) at t = {t_now + h:.6g} s. The demanded motion "
                "cannot be realised by this system (e.g. a slack rope or a load above the "
                "trolley); slow the demand down or change it near this time.",
                time=t_now + h,
            )
        if kind is not None and kind[0] == "cond":
            new = choose_partition(
                np.asarray(pb.fun_mats(Y[:n, pos], Y[n : 2 * n, pos] / h)[0]), t_now
            )
            if new.dependent == part.dependent:
                cond_limit = max(cond_limit, 100.0 * new.cond)
            else:
                part, cond_limit = new, COND_REPIVOT
                partitions.append({"t_s": t_now, **part.to_dict()})
                ct = time.perf_counter()
                scheme = _scheme(pb, meth, h, part, tol, chunk_len, jit, n_steps)
                compile_time += time.perf_counter() - ct
            continue
        if pos >= n_steps or jj == take:
            continue
        # Newton did not converge within the unrolled iterations: retry this step plainly
        z0 = np.tile(X[:N], ns) + np.concatenate([c * (X[:N] - X[N:]) for c in cs])
        z, it, err = newton_step(scheme, X, P[:, pos], z0)
        if z is None:
            _newton_failure(pb, Y[:, pos], h, t_now + h, it, err)
        Y[:, pos + 1] = z[(ns - 1) * N :]
        iters[pos + 1] = it
        X = np.r_[Y[:, pos + 1], Y[:, pos]]
        pos += 1
    wall = time.perf_counter() - wall

    t = t0 + h * np.arange(n_steps + 1)
    Q, V, U = Y[:n], Y[n : 2 * n] / h, Y[2 * n :] / h**2
    V[:, 0], U[:, 0] = v0, u0
    phi = np.asarray(ca.Function("phi", [pb.q], [pb.Phi]).map(n_steps + 1)(Q))
    gam = demand.evaluate(pb.output_names, t, 0)[0]
    viol = float(np.max(np.abs(phi - gam)))
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
        max_constraint_violation=viol,
        newton_iterations_total=int(iters.sum()),
        newton_iterations_max=int(iters.max()),
        wall_time_s=wall,
        compile_time_s=compile_time,
        rank_info=rank_info,
        partitions=tuple(partitions),
        warnings=tuple(msgs),
        demand=demand,
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

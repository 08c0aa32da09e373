"""Compiled residual core: one CasADi Function per (model, n_q), then the LM solver of ``lm``.

Because the model response ``h(p, q)`` (n_q, n_S) is the same for every series, the weighted
least-squares cost over all residuals ``l = (i, j, k)`` with 0/1 weights ``w_ijk`` reduces
exactly to aggregated residuals over ``(j, k)``:

    1/2 sum_ijk w_ijk (h_jk - z_ijk)^2 / sigma_k^2
      = 1/2 sum_jk W_jk (h_jk - zbar_jk)^2 + const,

with ``W_jk = sum_i w_ijk / sigma_k^2`` and ``zbar_jk`` the weighted series mean. The same holds
for the Gauss-Newton matrix ``J^T Omega J = sum_jk W_jk grad h_jk grad h_jk^T`` and for Bard's
second-order term ``S = sum_l w_l r_l Hess r_l = sum_jk W_jk (h_jk - zbar_jk) Hess h_jk``.
So a split or sensor mask is only a weight vector, and one compiled function serves all tests.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any

import casadi as ca
import numpy as np

from methods.errors import InputError
from methods.press.lsq.evaluation import EPS, _point_fn, _residual_fns, residual_fns
from methods.press.lsq.lm import StopReason, Tolerances, levenberg_marquardt
from methods.press.lsq.minpack import minpack_first
from methods.press.lsq.problem import LSProblem
from methods.timeouts import call_with_time_limit

__all__ = ["EPS", "CompiledModel", "LSResult", "_point_fn", "_residual_fns", "compile_model",
           "parameter_arrays", "solve_ls"]  # fmt: skip


class CompiledModel:
    """``hJ(p, q) -> (h, J)`` with h (n_q*n_S,) in (step, sensor) C-order, J (n_q*n_S, n_p);
    ``S(p, q, v) -> sum_l v_l Hess_p h_l`` (n_p, n_p).

    ``S`` is built on first use (``S`` given as a function of no arguments): its symbolic
    Hessian costs about twice ``hJ``'s Jacobian, and a caller that needs only ``h`` and ``J``
    does not pay it. Evaluation goes through CasADi ``FunctionBuffer`` objects bound to
    preallocated numpy arrays (about 15x less call overhead than ``Function.__call__`` with DM
    conversion); the buffers are per thread so thread-pool workers can share one compiled
    model.
    """

    def __init__(self, n_p: int, n_q: int, n_s: int, hJ: Any, S: Any) -> None:
        self.n_p, self.n_q, self.n_s = n_p, n_q, n_s
        self.hJ = hJ
        self._S = S
        self._S_built = isinstance(S, ca.Function)
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def S(self) -> Any:
        """The CasADi ``S`` function, built on first access (once, whichever thread asks)."""
        if not self._S_built:
            with self._lock:
                if not self._S_built:
                    self._S = self._S()
                    self._S_built = True
        return self._S

    def _buffers(self) -> SimpleNamespace:
        b = getattr(self._local, "b", None)
        if b is None:
            n_l = self.n_q * self.n_s
            b = SimpleNamespace(
                p=np.zeros(self.n_p), q=np.zeros(self.n_q), v=np.zeros(n_l),
                h=np.zeros(n_l), Jt=np.zeros((self.n_p, n_l)), H=np.zeros((self.n_p, self.n_p)),
                ev2=None,
            )  # fmt: skip
            b.buf1, b.ev1 = self.hJ.buffer()
            _bind(b.buf1, (b.p, b.q), (b.h, b.Jt))
            self._local.b = b
        return b

    def eval_hJ(self, p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = self._buffers()
        b.p[:] = p
        b.q[:] = q
        b.ev1()
        # dense column-major J (n_l, n_p) lands in the C-order (n_p, n_l) buffer as J^T
        return b.h.copy(), b.Jt.T.copy()

    def eval_S(self, p: np.ndarray, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        b = self._buffers()
        if b.ev2 is None:
            b.buf2, b.ev2 = self.S.buffer()
            _bind(b.buf2, (b.p, b.q, b.v), (b.H,))
        b.p[:] = p
        b.q[:] = q
        b.v[:] = v
        b.ev2()
        return b.H.copy()


def _bind(buf: Any, args: tuple[np.ndarray, ...], res: tuple[np.ndarray, ...]) -> None:
    """Bind a CasADi ``FunctionBuffer``'s inputs and outputs to numpy arrays."""
    # numpy's stubs declare ndarray.__buffer__ only for Python >= 3.12 (we check 3.11)
    for i, a in enumerate(args):
        buf.set_arg(i, memoryview(a))  # type: ignore[arg-type]
    for i, r in enumerate(res):
        buf.set_res(i, memoryview(r))  # type: ignore[arg-type]


# (id(model), n_q) -> (the model, weakly where it allows that; its compiled functions): an entry
# lives as long as its model object. Held strongly, every model ever fitted stayed (a leak in a
# long process, and the survivors made the garbage collector run its full collections, ~45 ms
# each, in the middle of later fits)
_CACHE: dict[tuple[int, int], tuple[Callable[[], object], CompiledModel]] = {}


def compile_model(model: Any, n_q: int) -> CompiledModel:
    """Build (once per model object and scenario length) the CasADi functions of the core."""
    key = (id(model), n_q)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is model:
        return hit[1]
    n_p = len(model.parameters)
    n_s = len(model.sensors)
    p = ca.SX.sym("p", n_p)
    q = ca.SX.sym("q", n_q)
    try:
        with warnings.catch_warnings():
            # numpy functions on symbols (np.column_stack of SX columns) work through CasADi's
            # legacy numpy mode, which announces its future change with a long FutureWarning
            warnings.filterwarnings("ignore", category=FutureWarning, module="casadi")
            name = getattr(model, "name", type(model).__name__)
            what = f"model {name!r}: response(p, forces) on CasADi symbols"
            H = ca.SX(call_with_time_limit(model.response, p, q, what=what))
    except InputError:  # PluginTimeout: the plugin ran longer than GREYLAB_PLUGIN_TIMEOUT_S
        raise
    except Exception as exc:  # a user model that cannot take CasADi symbols
        raise InputError(
            f"model {getattr(model, 'name', model)!r}: response(p, forces) must evaluate on "
            f"CasADi symbols (use casadi fmax/fmin/sqrt, not numpy branches): {exc}"
        ) from exc
    if H.shape != (n_q, n_s):
        raise InputError(f"model response has shape {H.shape}, expected ({n_q}, {n_s})")
    h = ca.vec(H.T)  # (step, sensor) order: index j * n_S + k
    J = ca.jacobian(h, p)

    def build_S() -> ca.Function:
        v = ca.SX.sym("v", n_q * n_s)
        Hv = ca.hessian(ca.dot(v, h), p)[0]
        return ca.Function("press_S", [p, q, v], [ca.densify(Hv)])

    comp = CompiledModel(
        n_p, n_q, n_s, ca.Function("press_hJ", [p, q], [h, ca.densify(J)]), build_S
    )
    _CACHE[key] = (_reference(model, key), comp)
    return comp


def _reference(model: Any, key: tuple[int, int]) -> Callable[[], object]:
    """A weak reference to ``model`` whose end drops the cache entry ``key``; a model that takes
    no weak reference (``__slots__`` without ``__weakref__``) is held, as before."""
    try:
        return weakref.ref(model, partial(_drop, _CACHE, key))  # the dict itself: at exit too
    except TypeError:
        return lambda: model


def _drop(cache: dict, key: tuple[int, int], ref: weakref.ref) -> None:
    """The model of ``key`` was freed: its entry goes (only that entry, not a newer one)."""
    hit = cache.get(key)
    if hit is not None and hit[0] is ref:
        del cache[key]


@dataclass(frozen=True)
class LSResult:
    """``p`` estimates (model units), ``cost`` 1/2 weighted RSS (aggregated), ``success``
    (only when ``reason.converged``: the test of ``methods.press.lsq.lm``), ``message`` in words,
    ``n_iter`` (all LM iterations, fallback included), ``reason``, ``optimality``
    (``||P_J r|| / ||r||``) and ``condition`` (cond of the column-scaled Jacobian); ``hJ``
    ``comp.eval_hJ(p, q)`` when the solver has it (one of its last two points), else None."""

    p: np.ndarray
    cost: float
    success: bool
    message: str
    n_iter: int
    reason: StopReason = StopReason.MAX_ITERATIONS
    optimality: float = float("nan")
    condition: float = float("nan")
    hJ: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)


def _trf(
    evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_nfev: int,
) -> np.ndarray | None:
    """scipy's trust-region reflective (``x_scale='jac'``, exact Jacobian) from ``x0``; its
    own stopping rules are not trusted: the caller polishes and tests the point."""
    cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def ev(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            r, J, _ = evaluate(x[None])
            if not (np.isfinite(r).all() and np.isfinite(J).all()):
                r, J = np.full_like(r, 1e150), np.zeros_like(J)
            cache[key] = (r[0], J[0])
        return cache[key]

    x0 = np.clip(x0, lo, hi)
    if np.isfinite(lo).any() or np.isfinite(hi).any():  # trf needs a strictly interior start
        span = np.where(np.isfinite(hi - lo), hi - lo, 1.0)
        x0 = np.clip(x0, lo + 1e-10 * span, hi - 1e-10 * span)
    try:
        with np.errstate(all="ignore"):  # trial points of a runaway overflow
            from scipy import optimize  # imported on use (a model product stays light)

            res = optimize.least_squares(
                lambda x: ev(x)[0], x0, jac=lambda x: ev(x)[1], bounds=(lo, hi),
                method="trf", x_scale="jac", xtol=1e-15, ftol=1e-15, gtol=1e-15,
                max_nfev=max_nfev,
            )  # fmt: skip
    except (ValueError, np.linalg.LinAlgError):
        return None
    return np.asarray(res.x, float)


def solve_ls(
    problem: LSProblem,
    *,
    tol: Tolerances = Tolerances(),  # noqa: B008 - frozen dataclass
    second_order: bool = True,
    fallback: bool = True,
    minpack: bool = True,
) -> LSResult:
    """Minimise ``1/2 sum_l wt_l (h_l(p) - zbar_l)^2`` in scaled ``x = p / scale``.

    ``problem``: one fit (``zbar``, ``wt`` flat (n_q*n_S,)). Unbounded problems (and
    ``minpack``) start with MINPACK's ``lmder`` and Newton steps on its end point
    (``methods.press.lsq.minpack``); the convergence test of ``methods.press.lsq.lm`` decides
    ``success`` there as everywhere. Where it fails (or for bounded problems): the
    Levenberg-Marquardt of ``methods.press.lsq.lm``, from MINPACK's point and then from the
    start; full Hessian ``J^T W J + S`` after 15 iterations when positive definite. If LM does
    not converge, fallback: scipy's trust-region
    reflective (``x_scale='jac'``) from the start, then from LM's end point, each followed by
    LM from trf's point (which must pass the same test). Bounds by projection.
    """
    if problem.batched:
        raise InputError("zbar: solve_ls fits one problem (n_l,); use solve_ls_batch for (N, n_l)")
    scale = problem.scale
    lo, hi = problem.lower / scale, problem.upper / scale
    evaluate, second, recent = residual_fns(problem)
    run = partial(
        levenberg_marquardt, evaluate, lo=lo, hi=hi, tol=tol,
        second_order=second if second_order else None,
    )  # fmt: skip
    x0 = np.clip(problem.p0 / scale, lo, hi)
    res, n_iter = None, 0
    if minpack and not (np.isfinite(lo).any() or np.isfinite(hi).any()):
        # MINPACK's compiled LM first, its end point polished and tested (minpack module);
        # where the test fails, the careful LM continues from there, then from the start
        first = minpack_first(
            _point_fn(problem), evaluate, x0, lo, hi, tol=tol,
            second_order=second if second_order else None,
        )  # fmt: skip
        if first is not None:
            res, n_iter = first, int(first.n_iter[0])
            if not res.reasons[0].converged:  # (one problem: its reason, not the array)
                for start in (res.x, x0[None]):
                    more = run(start)
                    n_iter += int(more.n_iter[0])
                    if more.reasons[0].converged or more.cost[0] < res.cost[0]:
                        res = more
                    if res.reasons[0].converged:
                        break
    if res is None:
        res = run(x0[None])
        n_iter = int(res.n_iter[0])
    best, via = res, ""
    if fallback and not res.reasons[0].converged:
        for start, label in ((x0, "the start"), (res.x[0], "LM's end point")):
            xt = _trf(evaluate, start, lo, hi, max_nfev=50 * tol.max_iter)
            if xt is None:
                continue
            polished = run(xt[None])
            n_iter += int(polished.n_iter[0])
            if polished.reasons[0].converged or polished.cost[0] < best.cost[0]:
                best, via = polished, f" after trust-region-reflective fallback from {label}"
            if best.reasons[0].converged:
                break
    reason = best.reasons[0]
    x = best.x[0]
    msg = reason.text + (via if reason.converged else "")
    if reason.converged and (np.any(x <= lo) or np.any(x >= hi)):
        msg += " at a parameter bound"
    return LSResult(
        x * scale, float(best.cost[0]), reason.converged, msg, n_iter, reason,
        float(best.test.optimality[0]), float(best.test.condition[0]), recent(x),
    )  # fmt: skip


def parameter_arrays(
    model: Any,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Names, start values, scales and lower/upper bounds (inf where unbounded)."""
    names = list(model.parameters)
    p0 = np.array([float(model.parameters[n]) for n in names])
    bounds = getattr(model, "bounds", None) or {}
    if not bounds:  # no bounds: no reach below, the scale |p0| or 1 (the same arrays)
        size, a = len(names), np.abs(p0)
        return names, p0, np.where(a > 0, a, 1.0), np.full(size, -np.inf), np.full(size, np.inf)
    lo = np.array([float(bounds.get(n, (-np.inf, np.inf))[0]) for n in names])
    hi = np.array([float(bounds.get(n, (-np.inf, np.inf))[1]) for n in names])
    # scale by the start value (stiffnesses ~1e3 N/um, friction ~1e-2); a zero start by the
    # larger bound's magnitude when both bounds are finite, else by 1
    finite = np.isfinite(lo) & np.isfinite(hi)
    reach = np.where(
        finite, np.maximum(np.abs(np.where(finite, lo, 0)), np.abs(np.where(finite, hi, 0))), 0
    )
    scale = np.where(np.abs(p0) > 0, np.abs(p0), np.where(reach > 0, reach, 1.0))
    return names, p0, scale, lo, hi

"""Compiled simulation of an assembled drive-train model over a whole record.

Integration: classical RK4 on the sample grid (step ``dt``) with ``n_sub`` equal substeps and
a first-order hold of the input between samples, wrapped in a CasADi ``mapaccum`` so that one
call simulates the whole record and forward sensitivities ``dy/dp`` come from CasADi AD. The
substeps of a sample are a loop (``fold``) over one compiled substep, not an unrolled
expression, so code size and compile time do not grow with ``n_sub``.

Step-size rule: ``models.drivetrain.substeps`` (the stiffness at the parameter point;
issue 26). Simulators are cached per structure, grid and ``n_sub`` (:func:`get_simulator`).

Accuracy (:func:`simulate`, a recording's simulation): without an explicit ``n_sub`` the
stability count is doubled until the outputs at ``n_sub`` and ``2 n_sub`` differ by at most
:data:`SIM_ACCURACY` of the output's sum of squares about its mean (step doubling; were the
error first order in ``h``, the error at ``n_sub`` would be about twice that difference: its
sum of squares at most ``4 SIM_ACCURACY = 1e-8`` of the output's).

Backlash: the exact gap law's substeps locate their impacts (``models.drivetrain.gap``).

Delay: ``u(t - T_d)`` by linear interpolation between samples (a hat-function convolution,
differentiable in ``T_d``); before the record starts the first sample is held.
Initial state: at rest except that every inertia moves with the initial velocity ``y0``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import casadi as ca
import numpy as np

from methods.errors import InputError
from models import budget
from models.budget import SimulationCost
from models.drivetrain.gap import gap_substep, rk4
from models.drivetrain.kit import StateSpace, assemble
from models.drivetrain.submodels import DEFAULT_F_TANH, Submodel, canonical
from models.drivetrain.substeps import explicit_substeps, rule_substeps, stiffness_reason

#: step doubling of a recording's simulation (module docstring): ``sum (y_n - y_2n)^2`` at most
#: this share of ``sum (y - mean y)^2``
SIM_ACCURACY = 2.5e-9
_BUILD_LOCK = threading.Lock()
OPTIMISE_WORK = 2_000_000


def optimisation(opt: str, n_sub: int, n_samples: int, nx: int, n_p: int) -> str:
    """The C optimisation level for a simulator: ``opt`` itself, or for ``"auto"`` ``-O1`` when
    a simulation with sensitivities is heavy, ``n_sub (N - 1) nx (1 + n_p) >=``
    :data:`OPTIMISE_WORK`, else ``-O0``. Measured (``benchmarks/drive_jit.py``, EMPS structures
    at 100 Hz): an optimised build (gcc) costs 0.1-0.35 s more than tcc's and runs the Jacobian
    2.3-3.5x faster, ~35 ms per 1e6 of that work at ``-O0``; an identification runs about ten,
    so ``-O1`` pays from ~2e6 on. The paper's reference (at most ~6e5) stays at ``-O0``."""
    if opt != "auto":
        return opt
    return "-O1" if n_sub * (n_samples - 1) * nx * (1 + n_p) >= OPTIMISE_WORK else "-O0"


def simulation_cost(model: StateSpace, n_samples: int, dt: float, n_sub: int) -> SimulationCost:
    """The cost of a whole-record simulator (`models.budget`), known before it is built."""
    taps = 0
    if Submodel.DELAY in model.structure:
        upper = model.specs[model.param_names.index("T_d")].upper
        taps = min(math.ceil(upper / dt) + 2, n_samples) if math.isfinite(upper / dt) else n_samples
    return SimulationCost(n_samples, n_sub, model.x.size1(), model.p.size1(), taps)


def _what(model: StateSpace) -> str:
    return f"drive model {[k.value for k in model.structure]}"


def check_limits(
    model: StateSpace,
    n_samples: int,
    dt: float,
    n_sub: int,
    rho: float,
    at: np.ndarray | Mapping | None,
) -> None:
    """The machine's sample and work limits (`models.budget`) for a simulator of `model` with
    `n_sub` substeps (`rho`: the step-size rule's stiffness there, named when it set them);
    checked for every simulator asked for, built or taken from the cache."""
    what = _what(model)
    budget.check_samples(n_samples, what)
    cost = simulation_cost(model, n_samples, dt, n_sub)
    budget.check_cost(cost, f"{what} at sample time {dt:g} s",
                      stiffness_reason(model, dt, rho, at) if n_sub > 1 else "")  # fmt: skip


@dataclass(frozen=True, eq=False)
class CompiledSimulator:
    """Whole-record simulator for one structure and grid.

    ``simulate(p, u, y0) -> y`` (N,), ``simulate_with_jacobian(p, u, y0) -> (y (N,), J (N, n_p))``
    with ``p`` in the order of ``model.specs``, ``u`` the torque samples (N,) [N m].
    """

    model: StateSpace
    n_samples: int
    dt: float
    n_sub: int
    _sim: ca.Function
    _simjac: ca.Function | Callable[[], ca.Function]  # its builder until the first Jacobian
    native: bool = False

    def simulate(self, p: np.ndarray, u: np.ndarray, y0: float = 0.0) -> np.ndarray:
        return np.asarray(self._sim(p, u, y0)).ravel()

    def simulate_with_jacobian(
        self, p: np.ndarray, u: np.ndarray, y0: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        y, jac = self._jacobian_function()(p, u, y0)
        return np.asarray(y).ravel(), np.asarray(jac)

    def _jacobian_function(self) -> ca.Function:
        """The whole-record function with sensitivities, built on first use (it takes about
        three quarters of a simulator's memory, `models.budget`; a validation never calls it)."""
        built = self._simjac
        if isinstance(built, ca.Function):
            return built
        with _BUILD_LOCK:  # threads of one worker share the cached simulator
            built = self._simjac
            if not isinstance(built, ca.Function):
                built = built()
                object.__setattr__(self, "_simjac", built)
        return built


def _substep(model: StateSpace, h: float, n_q: int) -> tuple[ca.Function, ca.Function]:
    """One RK4 substep of length ``h`` (inputs ``[u_a, u_mid, u_b]``) and the same with forward
    sensitivities ``S = dx/dq`` for ``q = [p, u_0, u_1]`` (``n_q = n_p``: ``p`` alone;
    ``n_q = n_p + 2``: also the sample's input values, for the delay), ``w`` (3 x 2) the
    substep's input weights ``d[u_a, u_mid, u_b]/d[u_0, u_1]``."""
    fx = ca.Function("fx", [model.x, model.u, model.p], [model.rhs()])
    x, p, u3, w = model.x, model.p, ca.SX.sym("u3", 3), ca.SX.sym("w", 3, 2)
    if model.f_free is not None:
        xn = gap_substep(model, fx, x, u3, h)
    else:
        xn = rk4(fx, x, [u3[0], u3[1], u3[2]], p, h)
    sens = ca.SX.sym("S", x.size1(), n_q)
    if model.f_free is not None:
        # forward mode, one direction per column of S, d x+/d q = (d x+/d x) S + d x+/d q: the
        # same numbers to rounding as the symbolic Jacobians below, 25 % faster for the gap
        # law's substep (measured; the other models keep the symbolic form, equally fast)
        n_p = p.size1()
        seeds = ca.vertcat(sens, ca.horzcat(ca.SX.eye(n_p), ca.SX.zeros(n_p, n_q - n_p)))
        wrt = ca.vertcat(x, p)
        if n_q > n_p:
            wrt = ca.vertcat(wrt, u3)
            seeds = ca.vertcat(seeds, ca.horzcat(ca.SX.zeros(3, n_p), w))
        sens_next = ca.jtimes(xn, wrt, seeds)
    else:
        forcing = ca.jacobian(xn, p)
        if n_q > p.size1():
            forcing = ca.horzcat(forcing, ca.mtimes(ca.jacobian(xn, u3), w))
        sens_next = ca.mtimes(ca.jacobian(xn, x), sens) + forcing
    sub = ca.Function("rk4_sub", [x, u3, p], [xn])
    sub_s = ca.Function("rk4_subs", [ca.vertcat(x, ca.vec(sens)), u3, p, ca.vec(w)],
                        [ca.vertcat(xn, ca.vec(sens_next))])  # fmt: skip
    return sub, sub_s


def _sample_step(model: StateSpace, n_sub: int, dt: float, delay: bool) -> list[ca.Function]:
    """The step over one sample (``n_sub`` substeps, first-order hold of the input) without
    and with sensitivities: ``rk4(x, u01, p)`` and ``rk4s([x; vec S], u01, p, du01)`` with
    ``S = dx/dp`` (``du01 = d u01 / d T_d`` for a delay, which moves the input samples).

    The substeps are a loop (``fold``) over one compiled substep rather than an unrolled
    expression: generated code and compile time do not grow with ``n_sub``, and the small
    working set makes the Jacobian 3.2x faster for an EMPS two-mass model with backlash (same
    numbers to rounding; measured with the switching gap law before ``models.drivetrain.gap``;
    ``benchmarks/drive_jit.py`` rebuilds the unrolled one as baseline)."""
    nx, n_p = model.x.size1(), model.p.size1()
    n_q = n_p + 2 if delay else n_p
    sub, sub_s = _substep(model, dt / n_sub, n_q)
    weights = np.array([[1 - s / n_sub, s / n_sub] for j in range(n_sub)
                        for s in (j, j + 0.5, j + 1)])  # fmt: skip
    x, xs = ca.MX.sym("x", nx), ca.MX.sym("xs", nx * (1 + n_p))
    u01, p, du01 = ca.MX.sym("u01", 2), ca.MX.sym("p", n_p), ca.MX.sym("du01", 2)
    u3 = ca.reshape(ca.mtimes(ca.DM(weights), u01), 3, n_sub)
    w = ca.DM(np.hstack([weights[3 * j : 3 * j + 3].reshape(-1, order="F")[:, None]
                         for j in range(n_sub)]))  # fmt: skip
    sens0 = ca.reshape(xs[nx:], nx, n_p)
    if delay:
        sens0 = ca.horzcat(sens0, ca.MX.zeros(nx, 2))
    out = sub_s.fold(n_sub)(ca.vertcat(xs[:nx], ca.vec(sens0)), u3, p, w)
    sens = ca.reshape(out[nx:], nx, n_q)
    if delay:  # the input samples move with T_d: d x/d T_d += (d x/d u01) du01
        e_td = ca.DM.zeros(1, n_p)
        e_td[model.param_names.index("T_d")] = 1
        sens = sens[:, :n_p] + ca.mtimes(ca.mtimes(sens[:, n_p:], du01), e_td)
    step = ca.Function("rk4", [x, u01, p], [sub.fold(n_sub)(x, u3, p)])
    aug = ca.Function("rk4s", [xs, u01, p, du01], [ca.vertcat(out[:nx], ca.vec(sens))])
    return [step, aug]


def compile_simulator(
    model: StateSpace,
    n_samples: int,
    dt: float,
    *,
    min_substeps: int = 1,
    n_sub: int | None = None,
    at: np.ndarray | Mapping[str, float] | None = None,
    jit: bool = False,
    build: bool = True,
    opt: str = "auto",
) -> CompiledSimulator:
    """Build the CasADi functions for ``model`` on a grid of ``n_samples`` steps ``dt`` [s]
    with ``n_sub`` RK4 substeps per sample (None: the step-size rule at the parameter point
    ``at``, None for the nominals; at least ``min_substeps`` either way).

    Sensitivities are exact for the discrete scheme: the step propagates ``S = dx/dp`` with
    ``S+ = (dx+/dx) S + dx+/dp`` (forward sensitivities, SX), rolled out by ``mapaccum``.
    ``jit=True`` compiles the step to C with the system compiler (cached on disk by a hash of
    the generated code, see :mod:`models.drivetrain.jit`), 5-10x faster per call; ``opt`` is
    the compiler's optimisation level or ``"auto"`` (:func:`optimisation`).
    """
    if n_samples < 2:
        raise InputError(f"a record needs at least 2 samples, got {n_samples}")
    if not (dt > 0 and math.isfinite(dt)):
        raise InputError(f"sample time must be finite and > 0, got {dt!r}")
    budget.check_samples(n_samples, _what(model))
    if n_sub is None:
        n_sub, rho = rule_substeps(model, dt, min_substeps, at)
    else:
        n_sub, rho = explicit_substeps(model, dt, n_sub, min_substeps, at)
    check_limits(model, n_samples, dt, n_sub, rho, at)
    nx, n_p = model.x.size1(), model.p.size1()
    has_delay = Submodel.DELAY in model.structure
    step, aug = _sample_step(model, n_sub, dt, has_delay)
    native = False
    if jit:
        from models.drivetrain.jit import compiled_many

        level = optimisation(opt, n_sub, n_samples, nx, n_p)
        native_step, native_aug = compiled_many([step, aug], build=build, opt=level)
        native = native_aug is not aug
        step, aug = native_step, native_aug

    P = ca.MX.sym("p", n_p)
    U = ca.MX.sym("u", n_samples)
    Y0 = ca.MX.sym("y0")
    names = model.state_names
    n_mass = sum(1 for s in names if s.startswith("dq"))
    x0 = ca.MX.zeros(nx)
    for i in range(n_mass):
        x0[names.index(f"dq{i + 1}")] = Y0
    ud, dud = U, ca.MX.zeros(n_samples)
    if has_delay:  # u(t - T_d) = sum_m hat(T_d/dt - m) u[n - m]
        k = model.param_names.index("T_d")
        shift = P[k] / dt
        ud = 0
        for m in range(min(math.ceil(model.specs[k].upper / dt) + 2, n_samples)):
            shifted = ca.vertcat(ca.repmat(U[0], m, 1), U[: n_samples - m])
            inside = ca.fabs(shift - m) < 1
            ud = ud + ca.fmax(0, 1 - ca.fabs(shift - m)) * shifted
            dud = dud - inside * ca.sign(shift - m) / dt * shifted
    U2 = ca.horzcat(ud[:-1], ud[1:]).T
    dU2 = ca.horzcat(dud[:-1], dud[1:]).T
    idx = names.index("dq1")
    X = step.mapaccum("roll", n_samples - 1)(x0, U2, P)
    sim = ca.Function("sim", [P, U, Y0], [ca.vertcat(Y0, X[idx, :].T)])

    def simjac() -> ca.Function:  # built on the first Jacobian: a validation never needs it
        # sensitivities: initial S = 0 (x0 does not depend on p); the delay enters through U2
        x0s = ca.vertcat(x0, ca.MX.zeros(nx * n_p))
        XS = aug.mapaccum("rolls", n_samples - 1)(x0s, U2, P, dU2)
        rows = [idx + nx * (1 + j) for j in range(n_p)]
        jac = ca.vertcat(ca.MX.zeros(1, n_p), XS[rows, :].T)
        return ca.Function("simjac", [P, U, Y0], [ca.vertcat(Y0, XS[idx, :].T), jac])

    return CompiledSimulator(model, n_samples, float(dt), n_sub, sim, simjac, native)


_CACHE: dict[tuple, CompiledSimulator] = {}
_CACHE_LIMIT = 256
_REQUESTS: dict[tuple, int] = {}
_MODELS: dict[tuple, StateSpace] = {}
#: builds of whole-record simulators in this process (the cache's misses; tests read it)
BUILDS = {"count": 0}


def _freeze(mapping: Mapping | None) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, tuple | list) else v)
                        for k, v in (mapping or {}).items()))  # fmt: skip


def cached_model(
    structure: Iterable[Submodel | str | int],
    *,
    f_tanh: float = DEFAULT_F_TANH,
    nominals: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    backlash_smoothing: float = 0.0,
) -> StateSpace:
    """The assembled model from a per-process cache (key: structure, f_tanh, nominals, bounds,
    the backlash smoothing of an identification's continuation, ``kit.assemble``)."""
    kinds = canonical(structure)
    key = (tuple(k.value for k in kinds), float(f_tanh), _freeze(nominals), _freeze(bounds),
           float(backlash_smoothing))  # fmt: skip
    model = _MODELS.get(key)
    if model is None:
        model = assemble(kinds, f_tanh=f_tanh, nominals=nominals, bounds=bounds,
                         backlash_smoothing=backlash_smoothing)  # fmt: skip
        if len(_MODELS) >= _CACHE_LIMIT:
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[key] = model
    return model


def get_simulator(
    structure: Iterable[Submodel | str | int],
    n_samples: int,
    dt: float,
    *,
    f_tanh: float = DEFAULT_F_TANH,
    nominals: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    min_substeps: int = 1,
    n_sub: int | None = None,
    at: np.ndarray | Mapping[str, float] | None = None,
    jit: bool = False,
    jit_opt: str = "auto",
    jit_after: int = 1,
    backlash_smoothing: float = 0.0,
) -> CompiledSimulator:
    """Compiled simulator from a per-process cache (key: structure, grid, ``n_sub``, specs,
    f_tanh). ``n_sub``: the substeps per sample; None: the step-size rule at the parameter
    point ``at`` (a vector in the order of the model's specs or a mapping; None: the
    nominals), at least ``min_substeps``. The build itself (the expensive part) happens once
    per key; :func:`cached_model` assembles the model once per structure and box.

    ``jit=True``: native code from the disk cache if present; otherwise the ``jit_after``-th
    request of the structure in this process compiles it (``1``: at once, the default, right
    for a search that identifies each structure once; ``2``: one-offs stay interpreted) with
    the optimisation level ``jit_opt`` (see :mod:`models.drivetrain.jit`)."""
    model = cached_model(structure, f_tanh=f_tanh, nominals=nominals, bounds=bounds,
                         backlash_smoothing=backlash_smoothing)  # fmt: skip
    if n_sub is None:
        n, rho = rule_substeps(model, dt, min_substeps, at)
    else:
        n, rho = explicit_substeps(model, dt, n_sub, min_substeps, at)
    key = (tuple(k.value for k in model.structure), int(n_samples), float(dt), float(f_tanh),
           _freeze(nominals), _freeze(bounds), n, bool(jit), jit_opt,
           model.backlash_smoothing)  # fmt: skip
    sim = _CACHE.get(key)
    if sim is not None:  # built under the limits then: they may have changed since
        check_limits(model, n_samples, dt, n, rho, at)
    requests = _REQUESTS[key] = _REQUESTS.get(key, 0) + 1
    if sim is None or (jit and not sim.native and requests == max(2, jit_after)):
        sim = compile_simulator(model, n_samples, dt, n_sub=n, at=at, jit=jit,
                                build=requests >= jit_after, opt=jit_opt)  # fmt: skip
        BUILDS["count"] += 1
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = sim
    return sim


def simulate(
    structure: Iterable[Submodel | str | int],
    torque: np.ndarray,
    dt: float,
    parameters: Mapping[str, float] | None = None,
    *,
    y0: float = 0.0,
    f_tanh: float = DEFAULT_F_TANH,
    nominals: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    n_sub: int | None = None,
) -> np.ndarray:
    """Velocity of inertia 1 [rad/s] (N,) for the torque samples (N,) [N m]; missing
    parameters take their nominal values. ``n_sub``: exactly that many substeps (a fit's
    own, to reproduce it); None: the step-size rule at the parameters, doubled until the
    step-doubling difference is below :data:`SIM_ACCURACY` (module docstring), within the
    machine's substep and work limits (`models.budget`)."""
    torque = np.asarray(torque, dtype=float).ravel()
    options: dict = {"f_tanh": f_tanh, "nominals": nominals, "bounds": bounds}
    model = cached_model(structure, **options)
    p = model.values(parameters)
    if n_sub is not None:
        sim = get_simulator(structure, torque.size, dt, n_sub=n_sub, **options)
        return sim.simulate(p, torque, y0)
    sim = get_simulator(structure, torque.size, dt, at=p, **options)
    y = sim.simulate(p, torque, y0)
    while True:
        finer = get_simulator(structure, torque.size, dt, n_sub=2 * sim.n_sub, **options)
        y2 = finer.simulate(p, torque, y0)
        if np.all(np.isfinite(y)) and np.all(np.isfinite(y2)):
            diff = float(np.sum((y2 - y) ** 2))
            if diff <= SIM_ACCURACY * float(np.sum((y2 - y2.mean()) ** 2)):
                return y
        elif not np.all(np.isfinite(y2)) and finer.n_sub >= budget.limit(budget.MAX_SUBSTEPS):
            return y2
        sim, y = finer, y2

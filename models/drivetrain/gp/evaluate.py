"""Per-individual parameter identification and fitness; the picklable batch evaluator.

Identification: bounded least squares (scipy ``least_squares``, TRF) in box-normalised
coordinates ``z`` in ``[0, 1]`` (log scale where the sign is fixed) with the exact Jacobian of
the simulated output (forward sensitivities through RK4), from the inherited start and
``n_starts - 1`` random starts; with backlash or three or more inertias a full fit may
continue (``models.drivetrain.gp.continuation``, ``IdentificationSettings``).

Fitness (paper eq. 19): ``1 / (RSS (1 + k_P d))``, ``d`` = number of estimated parameters,
``RSS = sum (y_sim - y)^2`` over the fitness part of the record (all of it, or the held-out
tail with ``test_fraction > 0``). RSS is floored at ``1e-14 * sum (y - mean y)^2`` so that a
perfect (noise-free) fit keeps a finite fitness. With ``prefilter_hz > 0`` (beyond the paper,
see ``IdentificationSettings``) residuals, Jacobian and RSS are those of the zero-phase
low-passed output ``F(y_sim) - F(y)`` and the floor uses ``F(y)``. With
``position_weight = w > 0`` and a measured position ``q`` (beyond the paper), the residual
also holds the position error ``w (s_y / s_q) (int y_sim dt + q_0 - q)`` (``s`` = root sum of
squares about the mean, so ``w = 1`` weighs relative position and velocity errors alike) and
RSS includes it: the open-loop position drift pins the mean force balance (the offset).

Two stages (beyond the paper, ``screen_nfev > 0``): every new structure is screened with
``n_starts`` starts of at most ``screen_nfev`` residual evaluations on the head
``screen_fraction`` of the identification part of the record (a simulation costs in
proportion to its length whatever the model's stiffness), its fitness then from one
simulation of the whole record at the screened parameters, with the weights of the whole
identification part, so that screened and refined RSS share one yardstick; the search refines
only promising ones (``IndividualSpec.refine``: one start from the screened parameters, at
most ``max_nfev``, on the whole identification part), either in a second call or, with
``IndividualSpec.refine_above``, in the screening call itself once the screened fitness
reaches that threshold. With ``screen_nfev = 0`` every identification gets the full budget
on the whole part.

Bounds on the work: ``max_nfev`` residual evaluations per start, ``n_starts`` starts (the
remaining ones are skipped once a start reaches the floor, ``stop_at_floor``), and the wall
clock ``time_limit_s`` as a safety net. Deterministic for a given spec and seed unless the
time limit triggers (``Evaluation.timed_out``).

Substeps (issue 26; ``models.drivetrain.simulate``): each start simulates with the substep
count of the step-size rule at its own start point (a random start beyond the machine's
substep limit is skipped); ``n_sub`` stays fixed within one least-squares solve, so its
objective is smooth. A full identification (a refinement, or any without screening) then
settles the count at its end point (``solve.settle``): (i) stability: the rule at the end point
asks for more substeps than the fit used (the fit walked into stiffer parameters), or (ii)
accuracy by step doubling: the residuals simulated with ``n_sub`` and ``2 n_sub`` differ by
``sum (r_2n - r_n)^2 > solve.ACCURACY * max(cost, solve.ACCURACY_FLOOR)`` (``cost``: the
fit's RSS over the output's sum of squares, the residual's own units); then the count is raised
and the fit continues from its end point, at most ``solve.SETTLE_ROUNDS`` times, never beyond
the machine's substep or work limit, and only while the difference keeps falling (a stop
keeps the count reached and says so in ``Evaluation.message``). A screening stage re-checks only stability
(its fitness is a ranking, refined later). ``Evaluation.n_sub`` is the count the parameters
were fitted with; the evidence, the search's output and the registered model simulate with it.

``evaluate_batch`` is a pure top-level function of plain data (no closures, no CasADi
objects): workers compile simulators themselves and cache them per process.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from methods.blas import single_threaded_blas
from models.drivetrain.gp.continuation import (
    continuation_widths,
    continue_smoothing,
    ladder_starts,
)
from models.drivetrain.gp.objective import Clock, Objective, TimeLimitReached
from models.drivetrain.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.gp.signals import split_index
from models.drivetrain.gp.solve import FLOOR, minimise, settle
from models.drivetrain.simulate import CompiledSimulator, cached_model, get_simulator
from models.drivetrain.submodels import canonical
from models.drivetrain.substeps import substeps


@dataclass(frozen=True)
class RecordingArrays:
    """Plain arrays of a recording: torque ``u`` [N m] (N,), velocity ``y`` (N,), step ``dt``,
    optional measured position ``q`` (N,) (used only with ``position_weight > 0``)."""

    u: np.ndarray
    y: np.ndarray
    dt: float
    q: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.u.size)


@dataclass(frozen=True)
class IndividualSpec:
    """What a worker needs: the structure (names) and the start values of its parameters.

    ``refine``: the second stage (one start from ``start``, the whole identification part).
    ``refine_above`` (a screening spec only): refine in the same call, from the screened
    parameters, if the screened fitness reaches this value - a dispatch instruction, not part
    of ``key`` (the screening and the refinement are those of the two-call route). ``f_tanh``:
    the estimated gain ``start`` was fitted at (``gp.final_gain``'s centre; not ``identify``'s).
    ``also``: another start, taken instead of ``start`` where it fits better (one simulation
    each, ``Objective.better``; the final stage's simpler neighbour: its own search fit and the
    best's parameters with what it drops removed)."""

    structure: tuple[str, ...]
    start: tuple[tuple[str, float], ...]
    refine: bool = False
    refine_above: float | None = None
    f_tanh: float | None = None
    also: tuple[tuple[str, float], ...] | None = None

    def key(self) -> str:
        out = [list(self.structure), [[k, repr(v)] for k, v in self.start]]
        out += [] if self.f_tanh is None else [["f_tanh", repr(self.f_tanh)]]
        out += [] if self.also is None else [["also", [[k, repr(v)] for k, v in self.also]]]
        return json.dumps([*out, "refine"] if self.refine else out)


@dataclass(frozen=True)
class Evaluation:
    """Result of identifying one individual: structure (names), codes, parameters (name ->
    identified value), rss (fitness part), rss_train, fitness, n_params, nfev (simulations
    incl. Jacobians), wall_s, timed_out, message."""

    structure: tuple[str, ...]
    codes: tuple[int, ...]
    parameters: dict
    rss: float
    rss_train: float
    fitness: float
    n_params: int
    nfev: int
    wall_s: float
    timed_out: bool
    message: str = ""
    refined: bool = False
    n_sub: int = 1

    def to_dict(self) -> dict:
        out = asdict(self)
        out["structure"], out["codes"] = list(self.structure), list(self.codes)
        return out

    def summary(self) -> str:
        return (f"{list(self.codes)} {list(self.structure)}: fitness {self.fitness:.4g}, "
                f"RSS {self.rss:.4g}, d={self.n_params}, {self.nfev} sims, {self.wall_s:.2f} s")  # fmt: skip


def stopped(evaluations: Iterable[Evaluation]) -> list[str]:
    """The structures ("two_mass+coulomb") of the evaluations their time limit stopped, one per
    stop, in order (``StructureSearch.timed_out_``, ``StructureFit.timed_out_``)."""
    return ["+".join(ev.structure) for ev in evaluations if ev.timed_out]


def spec_seed(spec: IndividualSpec, seed: int) -> int:
    """Seed of the random restarts: a hash of the spec and the search seed, so a result does
    not depend on the order or place (process) of evaluation."""
    digest = hashlib.sha256(f"{seed}|{spec.key()}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def identify(
    spec: IndividualSpec, data: RecordingArrays, settings: GPSettings, seed: int = 0
) -> Evaluation:
    """Identify the parameters of one individual and compute its fitness (BLAS limited to
    one thread, see :func:`single_threaded_blas`); with ``spec.refine_above`` a screened
    individual whose fitness reaches it is refined at once (``nfev`` and ``wall_s`` of both
    stages summed)."""
    with single_threaded_blas():
        ev = _identify(spec, data, settings, seed)
        if spec.refine_above is None or ev.refined or not ev.fitness >= spec.refine_above:
            return ev
        fine = _identify(refinement(ev), data, settings, seed)
        return replace(fine, nfev=ev.nfev + fine.nfev, wall_s=ev.wall_s + fine.wall_s,
                       timed_out=ev.timed_out or fine.timed_out)  # fmt: skip


def refinement(ev: Evaluation) -> IndividualSpec:
    """The refinement stage's spec of a screened evaluation: its structure from its identified
    parameters."""
    return IndividualSpec(ev.structure, tuple(sorted(ev.parameters.items())), refine=True)


def screened_samples(n_fit: int, ident: IdentificationSettings) -> int:
    """Samples of the screening stage's residual: the head ``screen_fraction`` of the
    identification part (all of it without screening, ``screen_nfev = 0``)."""
    if not ident.screen_nfev or ident.screen_fraction >= 1.0:
        return n_fit
    return max(10, min(n_fit, round(n_fit * ident.screen_fraction)))


def _starts(
    spec: IndividualSpec, ident: IdentificationSettings, z_start: np.ndarray, seed: int
) -> tuple[list[np.ndarray], int]:
    """Start points (normalised) and the evaluation budget per start of one identification."""
    rng = np.random.default_rng(spec_seed(spec, seed))
    if spec.refine:  # stage 2: one start from the screened parameters, full budget
        return [z_start], ident.max_nfev
    # stage 1 (screening) or the only stage
    n_starts, max_nfev = ident.n_starts, ident.screen_nfev or ident.max_nfev
    return [z_start] + [rng.uniform(0, 1, z_start.size) for _ in range(n_starts - 1)], max_nfev


def _or_also(spec: IndividualSpec, objective: Objective, z: np.ndarray) -> np.ndarray:
    """The start ``z``, or ``spec.also`` (its names of the model) where that fits better
    (``IndividualSpec.also``; on the recovery benchmark's seed-1 machine #1 the truth's search
    fit had ended at RSS 8.37 and the answer with its gravity dropped cost 2.48)."""
    if spec.also is None:
        return z
    model = objective.sim.model
    also = {k: v for k, v in spec.also if k in model.param_names}
    try:
        return objective.better(z, objective.normalised(model.values(also)))
    except TimeLimitReached:  # (the fit itself then stops at once and says so)
        return z


def _identify(
    spec: IndividualSpec, data: RecordingArrays, settings: GPSettings, seed: int,
    clock: Clock | None = None,
) -> Evaluation:  # fmt: skip
    """One stage of :func:`identify`; ``clock``: the limits it shares (a ladder's fit of one
    inertia fewer: its parent's), else its own."""
    t0 = time.perf_counter()
    ident = settings.identification
    kit: dict[str, Any] = settings.kit_options()
    n_fit = split_index(data.n, settings.test_fraction)
    n_res = screened_samples(n_fit, ident) if not spec.refine else n_fit
    jit: dict[str, Any] = {"jit": ident.jit, "jit_opt": ident.jit_opt, "jit_after": ident.jit_after}

    def make_for(smoothing: float) -> Any:
        def make(n_samples: int, n_sub: int, native: bool = True) -> CompiledSimulator:
            options = jit if native else {"jit": False}
            return get_simulator(spec.structure, n_samples, data.dt, n_sub=n_sub, **options,
                                 **kit, backlash_smoothing=smoothing)  # fmt: skip

        return make

    make = make_for(0.0)
    model = cached_model(spec.structure, **kit)
    start = model.values({k: v for k, v in spec.start if k in model.param_names})
    sim = make(n_res, substeps(model, data.dt, 1, start))
    objective = Objective(make, sim, data, n_fit, ident, start, clock or t0)
    starts, max_nfev = _starts(spec, ident, objective.best_z, seed)
    starts[0] = _or_also(spec, objective, starts[0])
    given = starts[0]  # the spec's own start (a ladder's starts go before it)
    full_fit = spec.refine or not ident.screen_nfev
    extend = ident.extend_rounds if full_fit else 0
    if full_fit and ident.ladder_seed:  # from one inertia fewer (gp.continuation), whose
        # fit need not be exact: its backlash smoothing stops at the first width
        seeding = replace(settings, identification=replace(
            ident, backlash_smoothing=ident.backlash_smoothing[:1]))  # fmt: skip
        starts[0:0] = ladder_starts(spec, objective, lambda s: _identify(
            s, data, seeding, seed, objective.clock))  # fmt: skip
    widths = continuation_widths(spec.structure, ident) if full_fit else ()
    if widths:  # backlash: smoothed gap law first (models.drivetrain.gp.continuation)
        timed_out, message = continue_smoothing(make_for, objective, widths, starts, max_nfev,
                                                ident, extend, minimise, settle, given)  # fmt: skip
    else:
        timed_out, message = minimise(objective, starts, max_nfev, ident, extend)
    if not timed_out:  # after a smoothing continuation (an option): short refits
        short = (ident.screen_nfev or 10, 0) if widths else (max_nfev, extend)
        try:
            timed_out, settled = settle(objective, *short, ident, accuracy=full_fit)
        except TimeLimitReached:
            timed_out, settled = True, objective.clock.reason()
        message = settled or message
    if objective.sim.n_sub != objective.best_n or not objective.fitted():
        objective.use(objective.best_n)  # (a diverged best point: its RSS uncapped, or inf)
        with np.errstate(over="ignore", invalid="ignore"):
            r = objective.raw_residual(objective.best_z, objective.sim)
            objective.best_cost = float(np.sum(r**2))
    n_sub = objective.best_n
    p_hat = objective.parameters(objective.best_z)
    rss_train = float(objective.best_cost) * objective.scale**2
    if n_res < data.n:  # fitness on the held-out tail or (screened on the head) the whole
        full = make(data.n, n_sub)
        rss, y_fit = objective.held_out_rss(full, p_hat, data, n_fit if n_fit < data.n else 0)
    else:
        rss, y_fit = rss_train, objective.yf
    floor = FLOOR * float(np.sum((y_fit - y_fit.mean()) ** 2)) + 1e-300
    d = len(sim.model.specs)
    fitness = 1.0 / (max(rss, floor) * (1.0 + settings.k_p * d)) if np.isfinite(rss) else 0.0
    kinds = canonical(spec.structure)
    return Evaluation(
        structure=tuple(k.value for k in kinds),
        codes=tuple(k.code for k in kinds),
        parameters=dict(zip(sim.model.param_names, p_hat.tolist())),
        rss=rss, rss_train=rss_train, fitness=float(fitness), n_params=d,
        nfev=objective.nfev, wall_s=time.perf_counter() - t0, timed_out=timed_out,
        message=str(message), refined=spec.refine or not ident.screen_nfev, n_sub=int(n_sub),
    )  # fmt: skip


def evaluate_batch(
    batch: list[IndividualSpec], data: RecordingArrays, settings: GPSettings, seed: int = 0
) -> list[Evaluation]:
    """Identify every individual of a batch (pure, picklable: use it with any map)."""
    return [identify(spec, data, settings, seed) for spec in batch]

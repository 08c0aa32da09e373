"""Continuations of a full identification (issue 26): from one inertia fewer and over a
grid of spring scales (ladders, below), and, off by default since 2026-12-07, in the backlash
smoothing (``IdentificationSettings.backlash_smoothing``; ``structure_fit.CONTINUATION`` no
longer sets it: the exact law now locates its impacts, ``models.drivetrain.gap``, and
its own fit reaches the optimum, e.g. the kit's two_mass+coulomb+backlash to 1.3e-27 of
``sum y^2`` in 1.3 s where this smoothing took 22 s to 1.5e-9). What follows describes the
smoothing as it was needed until then.

Why: the exact gap law (``models.drivetrain.kit``: ``lambda`` stops at the walls ``0`` and
``-2 alpha`` through ``if_else``) makes the discrete simulation piecewise smooth in the
parameters. Its exact Jacobian (forward sensitivities through RK4) differentiates the active
branch only: in contact ``lambda`` keeps the value it overshot the wall with, so ``dy/dalpha``
is zero and the switching instants do not move with any parameter. Measured on
``drive simulate``'s two_mass+coulomb+backlash at 64 substeps: the Jacobian's ``alpha`` column
is 0 where central differences give a column of norm ~1, and the other columns are 30-97 %
off; the least-squares fits stalled (RSS 1.4e-4 of ``sum y^2`` with alpha 4 % off).

What: the fit first minimises the same residual of the smoothed gap law
(``kit._add_backlash``, walls as tanh steps of width ``w alpha``), whose sensitivities are
those of a smooth model (the ``alpha`` column within 0.1 % of central differences at 64
substeps), from the fit's starts at the widest ``w``, then from each stage's best point with
the next narrower ``w`` (``IdentificationSettings.backlash_smoothing``); the last smooth stage
settles its substeps (stability and step-doubling accuracy). The exact law then takes over
from the last smooth point (and keeps the fit's given start if that is better): the
reported parameters, RSS and substeps are always the exact model's (the one ``drive
simulate`` and the registered model use). At the reference's truth the smoothed law's
RSS is 5e-3, 3e-4, 7e-6 of ``sum y^2`` for ``w`` = 0.1, 0.01, 0.001: a smooth stage's optimum
is a start, not the answer; the exact law's fit from it (and from the last two optima
extrapolated to ``w`` = 0) finishes. The widths a named structure's fit uses are
``structure_fit.CONTINUATION``'s (0.03, 0.003, 0.0003). A narrower law that would need more
substeps than the machine limits allow ends the smoothing at the stage before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from models.budget import LimitError
from models.drivetrain.gp.objective import Objective, TimeLimitReached
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.substeps import power_of_two, substeps

Minimise = Callable[..., tuple[bool, str]]


def continuation_widths(structure: tuple[str, ...], ident: IdentificationSettings) -> tuple:
    """The smoothing widths of a full identification of ``structure`` (none without backlash)."""
    return tuple(ident.backlash_smoothing) if "backlash" in structure else ()


def continue_smoothing(
    make_for: Callable[[float], Callable[..., Any]],
    objective: Objective,
    widths: tuple[float, ...],
    starts: list[np.ndarray],
    max_nfev: int,
    ident: IdentificationSettings,
    extend: int,
    minimise: Minimise,
    settle: Minimise,
    given: np.ndarray | None = None,
) -> tuple[bool, str]:
    """Run the smooth stages from ``starts`` (module docstring), then the exact objective
    ``objective`` from the last smooth point; returns (timed out, message) as ``minimise``.
    ``make_for(w)`` is the ``make`` of the objective with smoothing ``w``; the simulations of
    every stage count in ``objective.nfev``. ``given``: the fit's own start among ``starts``
    (default the first; a ladder's starts come before it), one of the exact law's candidates:
    the fit never ends above it (on the recovery benchmark's seed-1 machine #1 the exact law
    measured a ladder spring start in its place, and a fit from 2.48 ended at 8.37)."""
    given = starts[0] if given is None else given
    return _continue(make_for, objective, widths, starts, max_nfev, ident, extend, minimise,
                     settle, given)  # fmt: skip


def _continue(
    make_for: Callable[[float], Callable[..., Any]], objective: Objective,
    widths: tuple[float, ...], starts: list[np.ndarray], max_nfev: int,
    ident: IdentificationSettings, extend: int, minimise: Minimise, settle: Minimise,
    given: np.ndarray,
) -> tuple[bool, str]:  # fmt: skip
    data_n = objective.sim.n_samples
    z, n_sub, message = starts[0], objective.sim.n_sub, ""
    ends: list[tuple[float, np.ndarray]] = []  # (width, the stage's best parameters)
    for k, width in enumerate(widths):
        make = make_for(width)
        start = objective.parameters(z)
        try:
            model = make(data_n, 1, native=False).model
            stage = Objective(make, make(data_n, substeps(model, objective.dt, 1, start)),
                              objective.data, objective.n_fit, ident, start, objective.clock)  # fmt: skip
            if k:  # the rule at rest does not see the smooth walls: the previous stage's
                # count, times the square root of the narrowing (measured: 16 substeps at
                # w = 0.003, 128 at 0.0003 on the two_mass+coulomb+backlash reference; the
                # settling finishes it)
                narrowing = power_of_two(np.sqrt(widths[k - 1] / width))
                stage.use(max(n_sub * narrowing, stage.sim.n_sub))
        except LimitError as exc:  # the narrower law needs more substeps than allowed: the
            # exact law takes over from the last stage's optimum
            message = f"smoothing stopped before width {width:g}: {exc}"
            break
        try:
            if k == 0:  # the walls' stiffness is not the rule's at rest: resolve it
                stage.min_substeps = resolved_substeps(stage, starts[0])
            first = [*starts, best_gap(stage, starts[0])] if k == 0 else [z]
            if len(first) > SCREEN_KEEP:
                first = screened(stage, first, ident, minimise)
            timed_out, message = minimise(stage, first, max_nfev, ident, extend, fixed=k > 0)
            if not timed_out:
                timed_out, settled = settle(stage, max_nfev, extend, ident)
                message = settled or message
        except TimeLimitReached:
            timed_out, message = True, objective.clock.reason()
        objective.nfev += stage.nfev
        if stage.fitted():
            z, n_sub = stage.best_z, stage.best_n
            ends.append((width, objective.parameters(z)))
        if timed_out:
            break
    try:  # at least the exact law's stable count at the last optimum
        n_sub = max(n_sub, objective.stable_substeps(z))
    except LimitError:
        pass
    objective.use(n_sub)
    candidates = [given, z]  # the given start and the last optimum, with the exact law
    if len(ends) >= 2:  # and the last two stages' optima extrapolated linearly to width 0
        (w1, p1), (w2, p2) = ends[-2:]
        candidates.append(objective.normalised(p2 + (p2 - p1) * w2 / (w1 - w2)))
    with objective.clock.lifted():  # measured even when late
        for candidate in candidates:
            objective.residual(candidate)
    return timed_out, message


#: the first smoothed stage fits every start with at most this many evaluations, then only
#: the ``SCREEN_KEEP`` best end points with the full budget (measured on drive simulate's
#: four_mass+backlash+delay: 12 starts of the full budget took 90 s; the one that reached the
#: truth's basin was at 1.3e-6 after 60 evaluations, the others at 1.6e-3..0.8)
SCREEN_NFEV = 40
SCREEN_KEEP = 2


def screened(
    stage: Objective, starts: list[np.ndarray], ident: IdentificationSettings, minimise: Minimise
) -> list[np.ndarray]:
    """The end points of the :data:`SCREEN_KEEP` best short fits (:data:`SCREEN_NFEV`
    evaluations, no extension) from ``starts``, best first; the stage keeps its best point.
    Stops at the time limit with the end points reached so far."""
    ends: list[tuple[float, int, np.ndarray]] = []
    best = (stage.best_cost, stage.best_z, stage.best_n)
    for i, z in enumerate(starts):
        stage.best_cost = np.inf
        timed_out, _message = minimise(stage, [z], SCREEN_NFEV, ident, 0)
        if stage.fitted():
            ends.append((stage.best_cost, i, stage.best_z))
            if stage.best_cost < best[0]:
                best = (stage.best_cost, stage.best_z, stage.best_n)
        if timed_out:
            break
    stage.best_cost, stage.best_z, stage.best_n = best
    ends.sort(key=lambda item: (item[0], item[1]))
    return [z for _cost, _i, z in ends[:SCREEN_KEEP]] or starts[:1]


#: a smoothed stage's substeps are doubled while one doubling changes the residual at its first
#: start by more than this (its sum of squares over the output's: an RMS of 1 %); measured on
#: drive simulate's four_mass+backlash+delay at w = 0.03: the truth fits to 1.1e-3 with 1
#: substep and 4.7e-4 with 2, 4 or 8 (one doubling changes it by 1.5e-4, 8e-7, 2e-9), and
#: the fits with 1 stalled at 0.16 where those with 2 reached 1.3e-6 from the same start
RESOLVED = 1e-5
RESOLVE_DOUBLINGS = 4


def resolved_substeps(stage: Objective, z: np.ndarray) -> int:
    """The count, from the rule's at ``z`` up, at most :data:`RESOLVE_DOUBLINGS` doublings,
    at which the smoothed stage's residual at ``z`` changes by at most :data:`RESOLVED` with
    a doubling (interpreted simulations, not counted)."""
    try:
        n = stage.stable_substeps(z)
    except LimitError:
        return 1
    for _ in range(RESOLVE_DOUBLINGS):
        coarse = stage.make(stage.sim.n_samples, n, native=False)
        fine = stage.make(stage.sim.n_samples, 2 * n, native=False)
        diff = stage.raw_residual(z, fine) - stage.raw_residual(z, coarse)
        if float(diff @ diff) <= RESOLVED or not stage.within_limits(2 * n):
            break
        n *= 2
    return n


#: the gap's normalised values tried from the first start (log scale: alpha's box is 1e-2..10x
#: its nominal, which lies at 2/3); measured on drive simulate's two_mass+backlash+
#: current_control+delay: from the screened point alpha fell to its lower bound (RSS 9e-3)
GAP_GRID = (0.1, 0.3, 0.5, 0.7, 0.9)


def best_gap(stage: Objective, z0: np.ndarray) -> np.ndarray:
    """``z0`` with the gap ``alpha`` at the value of ``GAP_GRID`` that fits best (one
    simulation each, counted in ``stage``)."""
    i = list(stage.sim.model.param_names).index("alpha")
    best, cost = z0, np.inf
    for value in GAP_GRID:
        z = z0.copy()
        z[i] = value
        r = stage.residual(z)
        if float(r @ r) < cost:
            best, cost = z, float(r @ r)
    return best


#: the springs added when a ladder seeds the next one, as multiples of the stiffest spring of
#: the simpler fit: 10 starts the richer ladder as the simpler fit (its new mode far above the
#: data's), 1 as a chain of like shafts (measured on drive simulate's three_mass+viscous+
#: gravity+delay: from 1 the exact fit, from 10 or 0.3 a local minimum at 1e-2 of sum y^2)
LADDER_STIFFNESS = (1.0, 10.0)


def simpler_ladder(structure: tuple[str, ...]) -> tuple[str, ...] | None:
    """The structure with one inertia fewer (three_mass -> two_mass, four_mass -> three_mass),
    None below three inertias."""
    names = {"three_mass": "two_mass", "four_mass": "three_mass"}
    if not any(k in names for k in structure):
        return None
    return tuple(names.get(k, k) for k in structure)


def from_simpler(
    parameters: dict[str, float], n: int, factor: float, at: int | None = None
) -> dict[str, float]:
    """The start of an ``n``-inertia ladder from an ``n - 1``-inertia fit: its inertia ``at``
    (default the last, ``n - 1``) split in halves, joined by a spring ``factor`` times the
    stiffest one with the damping ratio of the nearest shaft; the others shift one place
    outwards, every other parameter kept."""
    at = n - 1 if at is None else at
    old = dict(parameters)
    ladder = [old.pop(f"J{i}") for i in range(1, n)]
    springs = [old.pop(f"c{i}") for i in range(1, n - 1)]
    dampers = [old.pop(f"d{i}") for i in range(1, n - 1)]
    near = min(at - 1, n - 3)  # the shaft next to the split inertia (0-based)
    c_new = factor * max(springs)
    d_new = dampers[near] * np.sqrt(c_new / springs[near])
    ladder[at - 1 : at] = [ladder[at - 1] / 2] * 2
    springs.insert(at - 1, c_new)
    dampers.insert(at - 1, d_new)
    old |= {f"J{i + 1}": v for i, v in enumerate(ladder)}
    old |= {f"c{i + 1}": v for i, v in enumerate(springs)}
    return old | {f"d{i + 1}": v for i, v in enumerate(dampers)}


#: whether a ladder with backlash also starts from the fit of one inertia fewer (off: the
#: spring grid finds the basin, measured on drive simulate's four_mass+backlash+delay: the
#: three-mass fit (itself from a two-mass one) took 107 of 200 s and gave a start at 1.6e-3;
#: the spring grid's gave the exact fit)
LADDER_WITH_BACKLASH = False


def ladder_starts(
    spec: Any, objective: Objective, identify: Callable[[Any], Any]
) -> list[np.ndarray]:
    """Starts (normalised, tried before the given one) of a three- or four-mass ``spec``: its
    :func:`mode_starts`, then from ``identify`` (one start from
    ``spec``'s values, full budget) of its structure with one inertia fewer (none for fewer
    inertias); the simpler fit's simulations count in ``objective.nfev``."""
    simpler = simpler_ladder(spec.structure)
    springs = spring_starts(objective)
    if simpler is None or ("backlash" in spec.structure and not LADDER_WITH_BACKLASH):
        return springs + (mode_starts(objective) if simpler else [])
    modes = springs + mode_starts(objective)
    fit = identify(replace(spec, structure=simpler, refine=True, refine_above=None, also=None))
    objective.nfev += fit.nfev
    model = objective.sim.model
    n_j = sum(1 for name in model.param_names if name[0] == "J")
    seeds: list[tuple[float, int | None]] = [(factor, None) for factor in LADDER_STIFFNESS]
    seeds += [(LADDER_STIFFNESS[0], at) for at in range(1, n_j - 1)]  # the other splits
    return modes + [objective.normalised(model.values(from_simpler(fit.parameters, n_j, f, at)))
                    for f, at in seeds]  # fmt: skip


#: the spring scales screened from the nominal point (dampers by the square root: the damping
#: ratio kept), one simulation each, 1.13x apart: the scales' resonance need not be the chain's
#: lowest mode (drive simulate's four_mass+backlash+delay: 6.9, 12.4, 15.5 Hz, the scales
#: 23.4 Hz, springs 14x the truth's; at w = 0.03 the springs times 0.085 cost 0.16 of sum y^2
#: and fit to 1.3e-6, times 0.067 or 0.108 cost 0.8; from the mode starts a local minimum at
#: 1.5e-3)
SPRING_GRID = tuple(np.geomspace(0.01, 3.0, 49))
#: the best grid points kept as starts
SPRING_KEEP = 3


def spring_starts(objective: Objective) -> list[np.ndarray]:
    """The :data:`SPRING_KEEP` points of the nominal with every spring times a factor of
    :data:`SPRING_GRID` (dampers times its root) that fit best, measured by one simulation
    each with the objective's current simulator (counted; none without springs)."""
    model = objective.sim.model
    nominal = model.values({})
    shafts = [i for i, name in enumerate(model.param_names)
              if name[0] in "cd" and name[1:].isdigit()]  # fmt: skip
    if not shafts:
        return []
    scored = []
    for factor in SPRING_GRID:
        p = nominal.copy()
        for i in shafts:
            p[i] *= factor if model.param_names[i][0] == "c" else np.sqrt(factor)
        z = objective.normalised(p)
        r = objective.raw_residual(z, objective.sim)
        objective.count()
        with np.errstate(over="ignore"):  # a diverging start: inf, dropped below
            cost = float(r @ r) if np.all(np.isfinite(r)) else np.inf
        scored.append((cost, float(factor), z))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [z for cost, _f, z in scored[:SPRING_KEEP] if np.isfinite(cost)]


def mode_starts(objective: Objective) -> list[np.ndarray]:
    """The ladder's nominal point (the scales' equal shares, springs for the resonance as the
    lowest mode) and the same with the resonance taken as mode ``k = 2 .. n - 1`` of a chain
    of like inertias and shafts: springs times ``sin^2(pi / 2n) / sin^2(k pi / 2n)``, dampers
    times its root (measured on drive simulate's four_mass+stribeck+delay: the recording's
    19.5 Hz peak is the chain's third mode; from the lowest-mode springs (10x the truth) and
    from the third-mode ones a local minimum at 1.1e-3 of sum y^2, from the second exact)."""
    model = objective.sim.model
    nominal = model.values({})
    n = sum(1 for name in model.param_names if name[0] == "J")
    out = [objective.normalised(nominal)]
    for k in range(2, n):
        ratio = (np.sin(np.pi / (2 * n)) / np.sin(k * np.pi / (2 * n))) ** 2
        p = nominal.copy()
        for i, name in enumerate(model.param_names):
            if name[0] in "cd" and name[1:].isdigit():
                p[i] *= ratio if name[0] == "c" else np.sqrt(ratio)
        out.append(objective.normalised(p))
    return out

"""The bounded least squares of one drive identification and the settling of its substep count
(split from ``models.drivetrain.gp.evaluate``, whose module docstring describes both).

:func:`minimise`: scipy ``least_squares`` (TRF, exact Jacobians, box-normalised coordinates)
from each start in turn, continued while a round that ends on its budget still improves.
:func:`settle`: after a full fit, the substep count is raised until the end point is simulated
stably and accurately (step doubling), bounded by ``SETTLE_ROUNDS`` and the machine's limits.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import least_squares

from models import budget
from models.budget import LimitError
from models.drivetrain.gp.objective import Objective, TimeLimitReached
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.simulate import OPTIMISE_WORK
from models.drivetrain.substeps import power_of_two

FLOOR = 1e-14  # RSS floor relative to the output's sum of squares about its mean
#: accuracy by step doubling (module docstring): ``sum (r_2n - r_n)^2 <= ACCURACY * cost``.
#: Why 0.0025: were RK4's error first order (backlash's switching law until 2026-12-07; the
#: located impacts, ``models.drivetrain.gap``, converge irregularly, about second order), the
#: error of the ``n_sub`` solution would be about ``2 (r_n - r_2n)`` (smooth: ``16/15``); the
#: bound keeps the discretisation error's sum of squares at most 1 % of the residual's (its
#: RMS at most 10 % of the residual's RMS: on a fit at the noise floor, 10 % of the noise),
#: so that the fit's parameters are those of the machine, not of the integrator.
ACCURACY = 0.0025
#: the cost below which accuracy is not pursued further (noise-free fits): the bound is then
#: ``2.5e-9`` of the output's sum of squares, a recording's own (``simulate.SIM_ACCURACY``):
#: the discretisation error at most ``1e-8``, 100x below the kit's exact-fit target ``1e-6``
ACCURACY_FLOOR = 1e-6
#: at most this many raises of the substep count after a fit (each may jump several doublings)
SETTLE_ROUNDS = 6
#: one raise multiplies the count by at most this (an estimate from a first-order error, the
#: slowest convergence)
MAX_JUMP = 16
#: the accuracy raises go on only while the step-doubling difference at least halves from
#: one raise to the next (a first-order error's square falls 4x per doubling; the located
#: impacts' measured 3.7-88x)
CONVERGENCE = 0.5
#: a refit after a raise takes at least this many simulations' time at the new count (a
#: residual and a Jacobian; the Jacobian's forward sensitivities cost more than one
#: simulation, counted as one so that the estimate is a lower bound)
REFIT_SIMULATIONS = 2
EXTEND_GAIN = 0.01  # a round that lowers the cost by more than this share has not stalled


def minimise(
    objective: Objective,
    starts: list[np.ndarray],
    max_nfev: int,
    ident: IdentificationSettings,
    extend: int = 0,
    fixed: bool = False,
) -> tuple[bool, str]:
    """Bounded least squares from each start in turn (stopping early at the RSS floor or the
    time limit), each with the substep count of the step-size rule at its start point
    (``fixed``: the objective's current count); the best point stays in ``objective``. A
    start that ends on its evaluation limit while its last round still lowered the cost by
    more than ``EXTEND_GAIN`` is not taken as converged: it goes on from where it stopped, at
    most ``extend`` more rounds.
    Returns (timed out, last message)."""
    timed_out, message = False, ""
    for i, z0 in enumerate(starts):
        if ident.stop_at_floor and objective.best_cost <= FLOOR:
            break
        try:
            n_start = objective.sim.n_sub if fixed else objective.stable_substeps(z0)
        except LimitError:
            if i == 0 and not np.isfinite(objective.best_cost):
                raise  # the given start itself: the user's numbers are too stiff to simulate
            message = "a random start beyond the substep limit was skipped"
            continue
        best_cost, best_z, best_n = objective.best_cost, objective.best_z, objective.best_n
        objective.use(n_start)
        objective.best_cost, objective.best_z, objective.best_n = best_cost, best_z, best_n
        z, rounds = z0, 0
        try:
            while True:
                before = objective.best_cost
                # a diverging trial step overflows in the simulation and its prefilter
                with np.errstate(over="ignore"):
                    res = least_squares(objective.residual, z, jac=objective.jacobian,
                                        bounds=(0.0, 1.0), method="trf", max_nfev=max_nfev,
                                        ftol=ident.ftol, xtol=ident.xtol, gtol=ident.gtol,
                                        x_scale=1.0)  # fmt: skip
                message = res.message + (
                    f" (continued {rounds}x: still improving)" if rounds else ""
                )
                gain = 1.0 - 2.0 * float(res.cost) / before if 0 < before < np.inf else 1.0
                if res.status != 0 or rounds >= extend or not gain > EXTEND_GAIN:
                    break
                z, rounds = res.x, rounds + 1
        except TimeLimitReached:
            timed_out, message = True, objective.clock.reason()
            break
    return timed_out, message


def settle(
    objective: Objective, max_nfev: int, extend: int, ident: IdentificationSettings,
    accuracy: bool = True,
) -> tuple[bool, str]:  # fmt: skip
    """Raise the substep count until the end point is simulated stably and (``accuracy``)
    accurately (module docstring), refitting from the end point after each raise; returns
    (timed out, message: the last refit's, or why the settling stopped short). The objective
    ends on the count of its best point.

    Bounded (a search must not stall or fail on one individual): at most ``SETTLE_ROUNDS``
    raises; no raise beyond the machine's substep or work limit (`models.budget`); and the
    accuracy raises stop when the step-doubling difference does not at least halve from one
    raise to the next (``CONVERGENCE``: RK4's error then does not fall with the step, e.g. a
    wrong backlash structure chattering in its gap on EMPS, which asked for 32,768 substeps).
    A raise whose refit the identification's work or time limit cannot afford
    (:func:`_unaffordable`) is not begun: it stops as the limit would have stopped it, timed
    out. Each stop keeps the count reached and says so in the message."""
    timed_out, message = False, ""
    previous = np.inf
    for round_ in range(SETTLE_ROUNDS + 1):
        per_substep = 0.0  # seconds per substep of the last compiled accuracy check
        z = objective.best_z
        if objective.sim.n_sub != objective.best_n:  # best point found at another count
            objective.use(objective.best_n)
        n = objective.sim.n_sub
        try:
            target = max(n, objective.stable_substeps(z))
        except LimitError as exc:
            return timed_out, f"substeps not settled: stability at the end point: {exc}"[:400]
        if target == n and accuracy:
            if not objective.within_limits(2 * n):  # the check itself would pass the limit
                return timed_out, (f"substeps kept at {n}: the accuracy check needs {2 * n} "
                                   f"(beyond the machine limit, {budget.MAX_SUBSTEPS} / "
                                   f"{budget.MAX_WORK})")  # fmt: skip
            r_n = objective.raw_residual(z, objective.sim)
            finer = objective.make(objective.sim.n_samples, 2 * n, native=_heavy(objective, 2 * n))
            t_check = time.perf_counter()
            r_2n = objective.raw_residual(z, finer)
            per_substep = (time.perf_counter() - t_check) / (2 * n) if finer.native else 0.0
            cost = float(r_n @ r_n) if np.all(np.isfinite(r_n)) else np.inf
            diff = float(np.sum((r_2n - r_n) ** 2)) if np.isfinite(cost) else np.inf
            allowed = ACCURACY * max(cost, ACCURACY_FLOOR)
            if not diff <= allowed:  # first order: the error falls with n_sub, its square by 4
                if not diff <= CONVERGENCE * previous:
                    return timed_out, (f"substeps kept at {n}: the step-doubling difference "
                                       f"{diff:.3g} does not fall with the step (was "
                                       f"{previous:.3g}; wanted <= {allowed:.3g})")  # fmt: skip
                previous = diff
                ratio = np.sqrt(diff / allowed) if np.isfinite(diff) else MAX_JUMP
                target = n * min(MAX_JUMP, max(2, power_of_two(ratio)))
        if target == n:
            return timed_out, message
        why = _no_raise(objective, target, round_)
        limit = "" if why else _unaffordable(objective, target, per_substep)
        if why or limit:  # a limit's stop is a time-out, as the refit's own would have been
            return bool(limit), f"substeps kept at {n}: the end point asks for {target} " + (
                f"({why or limit})"
            )
        objective.use(target)
        timed_out, message = minimise(objective, [z], max_nfev, ident, extend, fixed=True)
        if timed_out:
            return timed_out, message
    return timed_out, message


def _heavy(objective: Objective, n_sub: int) -> bool:
    """Whether the step-doubling check's one simulation at ``n_sub`` is worth compiling: a
    light one runs interpreted (no C compile for a count that may never be used), a heavy one
    (``simulate.OPTIMISE_WORK`` state updates or more) compiled. Measured: the interpreted gap
    law (``models.drivetrain.gap``) is about 9x slower than compiled (two_mass+coulomb+backlash,
    2 s at 1 kHz: 3.0 s against 0.35 s at 256 substeps); on EMPS with the wide boxes a wrong
    backlash structure's check at 4096 substeps took about 60-120 s interpreted."""
    sim = objective.sim
    return n_sub * (sim.n_samples - 1) * sim.model.x.size1() >= OPTIMISE_WORK


def _no_raise(objective: Objective, target: int, round_: int) -> str:
    """Why the settling may not raise the count to ``target`` ("": it may)."""
    if round_ == SETTLE_ROUNDS:
        return f"after {SETTLE_ROUNDS} raises"
    if not objective.within_limits(target):
        return f"beyond the machine limit, {budget.MAX_SUBSTEPS} / {budget.MAX_WORK}"
    return ""


def _unaffordable(objective: Objective, target: int, per_substep: float) -> str:
    """Why the identification's limits cannot afford a refit at ``target`` ("": they can).
    A refit there charges at least a residual and a Jacobian (``2 + n_p`` simulations'
    work, ``Objective.jacobian``) and takes at least two simulations' time: ``per_substep``
    seconds a substep, as the compiled accuracy check just ran (0: it ran interpreted, no
    estimate). Measured on EMPS with the wide boxes: three wrong backlash structures raised
    to 4096 substeps spent 121-244 s on those two simulations, past their 120 s limit."""
    clock = objective.clock
    need = (2 + objective.best_z.size) * objective.work_at(target)
    if need > clock.work_limit - clock.work:
        return (f"work limit {clock.work_limit:.3g} state updates: a refit there needs "
                f"{need:.3g}, {clock.work_limit - clock.work:.3g} are left")  # fmt: skip
    seconds, left = REFIT_SIMULATIONS * per_substep * target, clock.seconds_left()
    if left <= 0.0 or seconds > left:
        return (f"time limit {clock.time_limit_s:g} s: a refit there needs about {seconds:.3g} "
                f"s, {max(left, 0.0):.3g} s are left")  # fmt: skip
    return ""

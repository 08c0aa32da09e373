"""The least-squares problem of one drive identification (``models.drivetrain.gp.evaluate``):
the (pre-filtered) velocity error, and the weighted position error, of a compiled simulation in
box-normalised coordinates, with its simulation count, best point and limits (``Clock``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from models import budget
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.gp.signals import initial_velocity, integral, lowpass
from models.drivetrain.simulate import CompiledSimulator, simulation_cost
from models.drivetrain.substeps import substeps

if TYPE_CHECKING:
    from models.drivetrain.gp.evaluate import RecordingArrays


#: a residual sample beyond this (relative to the norm of the output over the fit, so a
#: sample 1000x the whole record's) is a diverged simulation: beyond it the residual grows
#: with the logarithm of its size (:func:`capped`), so that a fit's cost stays finite and its
#: gradient still points back towards the stable parameters
R_CAP = 1e3
#: what a sample that is not finite counts: the cap of the largest finite one
R_TOP = R_CAP * (1.0 + math.log(np.finfo(float).max / R_CAP))
#: a Jacobian entry beyond this is no derivative (one ulp of the normalised parameter would
#: move a sample 200x the record's norm): it is capped here, so that scipy's trust-region
#: algebra (``J^T J``, its singular values to the 6th power) stays finite
J_CAP = 1e18


def capped(r: np.ndarray) -> np.ndarray:
    """The residual ``r`` as the fit sees it: itself up to :data:`R_CAP` in size, beyond it
    ``R_CAP (1 + log(|r| / R_CAP))`` with its sign (continuous, and so is its slope), and
    :data:`R_TOP` where it is not finite."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        size = np.abs(r)
        soft = np.where(size <= R_CAP, r, np.sign(r) * R_CAP * (1.0 + np.log(size / R_CAP)))
    return np.where(np.isfinite(r), soft, np.where(r < 0, -R_TOP, R_TOP))


def capped_slope(r: np.ndarray) -> np.ndarray:
    """``d capped(r) / d r`` per sample: 1 up to :data:`R_CAP`, ``R_CAP / |r|`` beyond, 0
    where ``r`` is not finite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.abs(r)
        return np.where(np.isfinite(r), np.where(size <= R_CAP, 1.0, R_CAP / size), 0.0)


class TimeLimitReached(Exception):
    """The identification's wall-clock or work limit passed (``IdentificationSettings.
    time_limit_s``, ``work_limit``)."""


class Clock:
    """The limits of one identification, shared by its stages (a backlash fit's smoothed ones):
    the wall clock since ``t0`` (``time_limit_s``) and the work charged (``work_limit``: state
    updates, ``budget.SimulationCost.work``; a Jacobian counts ``1 + n_p`` simulations; 0 or
    None: no work limit). The work does not depend on the machine or its load: a fit stopped
    by it stops at the same point anywhere, where a wall-clock stop depends on both."""

    def __init__(self, t0: float, time_limit_s: float, work_limit: float | None = None) -> None:
        self.t0, self.time_limit_s = t0, time_limit_s
        self.work_limit = float(work_limit) if work_limit else np.inf
        self.work = 0.0

    def charge(self, work: float) -> None:
        """Count ``work``; :class:`TimeLimitReached` once either limit has passed."""
        self.work += work
        if self.work > self.work_limit or time.perf_counter() - self.t0 > self.time_limit_s:
            raise TimeLimitReached

    @contextmanager
    def lifted(self) -> Iterator[None]:
        """Neither limit applies inside (the work is still counted)."""
        limits = self.time_limit_s, self.work_limit
        self.time_limit_s = self.work_limit = np.inf
        try:
            yield
        finally:
            self.time_limit_s, self.work_limit = limits

    def seconds_left(self) -> float:
        """Seconds left of the time limit (inf when lifted or unlimited)."""
        return self.time_limit_s - (time.perf_counter() - self.t0)

    def reason(self) -> str:
        """Which limit stopped the identification (for ``Evaluation.message``)."""
        if self.work > self.work_limit:
            return f"work limit {self.work_limit:.3g} state updates reached"
        return f"time limit {self.time_limit_s:g} s reached"


class Objective:
    """The least-squares problem of one identification in box-normalised coordinates ``z``.

    ``residual``/``jacobian``: the (pre-filtered) velocity error over the identification part
    of the record, with the weighted position error appended when ``position_weight > 0``,
    divided by ``scale``, as the fit sees it (:func:`capped` beyond :data:`R_CAP`; the Jacobian
    its derivative, at most :data:`J_CAP`). Counts simulations (``nfev``), keeps the best point
    seen (``best_z``, ``best_cost``: that capped cost; :meth:`fitted` whether it is a fit at all)
    and raises :class:`TimeLimitReached` once its ``clock``'s wall-clock or work limit has passed.
    """

    def __init__(
        self,
        make: Callable[..., CompiledSimulator],
        sim: CompiledSimulator,
        data: RecordingArrays,
        n_fit: int,
        ident: IdentificationSettings,
        start: np.ndarray,
        t0: float | Clock,
    ) -> None:
        """``sim`` simulates the first ``sim.n_samples`` samples (the residual's part: the
        whole identification part ``n_fit``, or its head when screening); ``make(n_samples,
        n_sub)`` gives the simulator of the same structure with another substep count (cached,
        ``get_simulator``); the weights (``scale``, ``wq``) come from the identification part,
        so that RSS values of screened and refined individuals share one yardstick. ``t0``:
        the identification's :class:`Clock`, or its start time (a clock of its own with the
        limits of ``ident``)."""
        specs = sim.model.specs
        self.make, self.data, self.n_fit = make, data, n_fit
        self.sim, self.dt = sim, data.dt
        self.clock = t0 if isinstance(t0, Clock) else Clock(t0, ident.time_limit_s,
                                                             ident.work_limit)  # fmt: skip
        self.best_n = sim.n_sub
        self.lower = np.array([s.lower for s in specs])
        self.width = np.array([s.upper - s.lower for s in specs])
        upper = self.lower + self.width
        # log scale where the sign is fixed (z = log(p / lower) / log(upper / lower))
        self.log = np.array([ident.log_scale and s.lower > 0 for s in specs], dtype=bool)
        self.log_lower = np.log(np.where(self.log, self.lower, 1.0))
        self.log_width = np.where(
            self.log, np.log(np.where(self.log, upper, np.e)) - self.log_lower, 1.0
        )
        n_res = sim.n_samples
        self.u = data.u[:n_res]
        self.filt = lowpass(ident.prefilter_hz, data.dt)
        self.keep = (lambda a: a) if self.filt is None else self.filt
        self.yf = self.keep(data.y[:n_res])
        y_fit = self.keep(data.y[:n_fit])
        self.scale = float(np.sqrt(np.sum((y_fit - y_fit.mean()) ** 2)) + 1e-300)
        self.q_all = data.q if ident.position_weight > 0 else None
        self.y0 = initial_velocity(data.y, self.q_all, data.dt)
        self.q: np.ndarray | None = None
        self.wq = 0.0
        if self.q_all is not None:
            # position residual integral(y_sim) + q[0] - q, weighted to velocity scale
            q_fit = self.q_all[:n_fit]
            self.q = self.q_all[:n_res]
            self.wq = (
                ident.position_weight
                * self.scale
                / float(np.sqrt(np.sum((q_fit - q_fit.mean()) ** 2)) + 1e-300)
            )
        self.nfev = 0
        #: the least count a start takes (a smoothed backlash stage's resolved count, set by
        #: ``gp.continuation``; 1: the step-size rule alone)
        self.min_substeps = 1
        self.best_cost = np.inf
        self.best_z = self.normalised(start)

    def fitted(self) -> bool:
        """Whether the best point is a fit: its cost below ``R_CAP ** 2``, so no sample of it
        diverged (and it was evaluated at all)."""
        return bool(self.best_cost < R_CAP**2)

    def normalised(self, p: np.ndarray) -> np.ndarray:
        """The normalised point ``z`` in ``[0, 1]`` of a parameter vector (clipped to the box)."""
        lin = (p - self.lower) / self.width
        with np.errstate(divide="ignore", invalid="ignore"):
            log = (np.log(np.maximum(p, self.lower)) - self.log_lower) / self.log_width
        return np.clip(np.where(self.log, log, lin), 0, 1)

    def parameters(self, z: np.ndarray) -> np.ndarray:
        """Parameter vector at the normalised point ``z``."""
        lin = self.lower + self.width * z
        if not self.log.any():
            return lin
        return np.where(self.log, np.exp(self.log_lower + self.log_width * z), lin)

    def slopes(self, z: np.ndarray) -> np.ndarray:
        """``dp/dz`` at ``z`` (per parameter)."""
        return np.where(self.log, self.parameters(z) * self.log_width, self.width)

    def use(self, n_sub: int) -> None:
        """Simulate with ``n_sub`` substeps from now on; the best cost is re-measured by the
        next evaluation (the old one belongs to another objective)."""
        if n_sub != self.sim.n_sub:
            self.sim = self.make(self.sim.n_samples, n_sub)
            self.best_cost = np.inf

    def work_at(self, n_sub: int) -> float:
        """State updates of one simulation with ``n_sub`` substeps (``budget.SimulationCost``)."""
        sim = self.sim
        return float(simulation_cost(sim.model, sim.n_samples, sim.dt, n_sub).work)

    def within_limits(self, n_sub: int) -> bool:
        """Whether a simulator with ``n_sub`` substeps stays within the machine's limits."""
        work = self.work_at(n_sub)
        return n_sub <= budget.limit(budget.MAX_SUBSTEPS) and work <= budget.limit(budget.MAX_WORK)

    def stable_substeps(self, z: np.ndarray) -> int:
        """The step-size rule's substep count at the point ``z`` (a `LimitError` beyond the
        machine's limit)."""
        return max(self.min_substeps, substeps(self.sim.model, self.dt, 1, self.parameters(z)))

    def raw_residual(self, z: np.ndarray, sim: CompiledSimulator) -> np.ndarray:
        """The residual at ``z`` simulated with ``sim`` (not counted, no best point kept)."""
        return self._residual_of(sim.simulate(self.parameters(z), self.u, self.y0))

    def _residual_of(self, ys: np.ndarray) -> np.ndarray:
        """The residual of the simulated output ``ys`` (uncapped)."""
        r = self.keep(ys) - self.yf
        if self.q is not None:
            r = np.concatenate([r, self.wq * (integral(ys, self.dt) + self.q[0] - self.q)])
        return r / self.scale

    def residual(self, z: np.ndarray) -> np.ndarray:
        """The residual at ``z`` with the current simulator, counted and the best kept."""
        r = capped(self.raw_residual(z, self.sim))
        self._check(z, r)
        return r

    def better(self, z: np.ndarray, other: np.ndarray) -> np.ndarray:
        """Of the points ``z`` and ``other``, the one that fits better (one simulation each,
        counted: :class:`TimeLimitReached` past a limit; ``z`` on a tie)."""
        costs = [float(r @ r) for r in (self.residual(z), self.residual(other))]
        return other if costs[1] < costs[0] else z

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """The residual's Jacobian at ``z`` (counted; the time limit enforced after it too: a
        Jacobian simulates the sensitivities of every parameter, and on EMPS a fit at 4096
        substeps ended 16.6 s past its 120 s limit, ``drive_search.py emps --costliest``)."""
        ysim, jp = self.sim.simulate_with_jacobian(self.parameters(z), self.u, self.y0)
        self.nfev += 1
        self.clock.charge(self.work * (1 + z.size))
        if self.q is not None:
            jp = np.vstack([self.keep(jp), self.wq * integral(jp, self.dt)])
        else:
            jp = self.keep(jp)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging simulation
            jz = capped_slope(self._residual_of(ysim))[:, None] * jp * self.slopes(z) / self.scale
        return np.clip(np.where(np.isfinite(jz), jz, 0.0), -J_CAP, J_CAP)

    def _check(self, z: np.ndarray, r: np.ndarray) -> None:
        """Count the simulation, keep ``z`` if it is the best so far, enforce the time limit."""
        self.nfev += 1
        with np.errstate(over="ignore"):  # (``residual`` caps it; uncapped: inf, never best)
            cost = float(r @ r)
        if cost < self.best_cost:
            self.best_cost, self.best_z, self.best_n = cost, z.copy(), self.sim.n_sub
        self.clock.charge(self.work)

    def count(self) -> None:
        """Count one simulation made outside :meth:`residual` (a start's screening: its work
        charged, no limit checked there; the next residual checks it)."""
        self.nfev += 1
        self.clock.work += self.work

    @property
    def work(self) -> float:
        """The work of one simulation with the current simulator (``Clock``)."""
        return self.work_at(self.sim.n_sub)

    def held_out_rss(
        self, full: CompiledSimulator, p: np.ndarray, data: RecordingArrays, n_fit: int
    ) -> tuple[float, np.ndarray]:
        """RSS from sample ``n_fit`` on (the held-out tail, or with ``n_fit = 0`` the whole
        record) of the whole record simulated through from the start with ``full`` at ``p``,
        and that part's (pre-filtered) output."""
        filt = self.filt
        y_all = filt(data.y) if filt else data.y
        y_sim = full.simulate(p, data.u, self.y0)
        resid = ((filt(y_sim) if filt and np.all(np.isfinite(y_sim)) else y_sim) - y_all)[n_fit:]
        if self.q_all is not None:
            pos = integral(y_sim, data.dt) + self.q_all[0] - self.q_all
            resid = np.concatenate([resid, self.wq * pos[n_fit:]])
        rss = float(resid @ resid) if np.all(np.isfinite(resid)) else np.inf
        return rss, y_all[n_fit:]

"""The friction tanh gain chosen by the recording (issue 26, part 3).

The kit smooths Coulomb and Stribeck friction with ``tanh(f_tanh dq1)``; ``f_tanh`` is a model
constant (one compiled simulator per value), by default ``100 / v_max`` rounded to 1, 2, 5 x
10^k (``models.drivetrain.scales``). A machine whose friction turns over more slowly or faster
than that cannot be fitted to its noise floor by its own structure: measured on
``benchmarks/drive_recovery.py`` machines (gain 20..500 / v_max), started at the TRUE
parameters, the true structure ended at 1.58, 6.6 and 10.5 times the noise floor with the
default gain and at 0.98, 1.1 and 0.96 with the machine's own (machines 0, 7, 9 of seed 0).
A rigid-body least-squares fit over a grid of gains does not find it (it chose 737 where the
machine had 30, 2000 where it had 50): the gain shows only through the dynamics.

:func:`profile_friction_gain` therefore profiles the identification over the gain: the
structure is identified at ``f_tanh`` times each of ``GAIN_FACTORS`` (0.2..5, covering the
benchmark's 20..500 / v_max around the default 100 / v_max), then at ``REFINE`` either side
of the best (a factor 10^0.2 = 1.58, half a grid step), then at most ``PARABOLA_STEPS`` = 2
times at the vertex of the parabola through ``log rss`` over ``log f_tanh`` at the best and
its neighbours (the profile is steep: machine 9 ends at 3.8, 2.1 and 4.7 times its floor at
gains 31.6, 50 and 79 around its true 40.9), and the gain whose identification has the lowest
fitness RSS (the held-out tail when the settings hold one out) wins. A structure
without Coulomb or Stribeck friction does not depend on the gain and is identified once.
The cost is at most ``len(GAIN_FACTORS) + 2 + PARABOLA_STEPS`` identifications (9) and as many compiled simulators.

:func:`warm_profile` is the search's final stage's cheaper variant (``gp.final_gain``): the
structure is identified once at ``f_tanh`` as the stage identifies it (continuations, ladder
starts), then every other gain is refitted from the fit of the gain next to
it towards the centre, with one start and without the ladder or backlash continuations (the
gain moves the optimum a little: the friction levels follow, the rest stays). The grid walks
out from the centre (``x 2``, ``x 5`` up; ``x 0.5``, ``x 0.2`` down) and stops on a side whose
step fitted worse than the one before (the profile is unimodal on the benchmark's machines:
measured, `docs/drive.md`, "The friction gain in the final stage"), then half a grid step
either side of the best, then the bracket of the best narrowed (parabola vertices, else
golden sections, in log gain) until both neighbours lie within 2 % of it, each from the best's
fit: at most 12 refits after the first fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from models.drivetrain.gp.evaluate import Evaluation, IndividualSpec, identify
from models.drivetrain.gp.recording import RecordingArrays
from models.drivetrain.gp.settings import GPSettings

GAIN_FACTORS = (0.2, 0.5, 1.0, 2.0, 5.0)
REFINE = (10.0**-0.2, 10.0**0.2)
PARABOLA_STEPS = 2
SMOOTHED = {"coulomb", "stribeck"}


@dataclass(frozen=True)
class GainProfile:
    """The chosen gain, its identification, and every ``(f_tanh, rss)`` tried (by gain)."""

    f_tanh: float
    evaluation: Evaluation
    profile: tuple[tuple[float, float], ...]
    #: the identification at the centre gain (``warm_profile``; None from the full profile)
    centre: Evaluation | None = None
    #: simulations and wall time of every identification of the profile (``warm_profile``)
    nfev: int = 0
    wall_s: float = 0.0
    #: the gains whose identification stopped at its time limit (``Evaluation.timed_out``)
    timed_out: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"f_tanh": self.f_tanh, "rss": self.evaluation.rss,
                "profile": [[g, r if math.isfinite(r) else None] for g, r in self.profile]}  # fmt: skip


def profile_friction_gain(
    spec: IndividualSpec, data: RecordingArrays, settings: GPSettings, seed: int = 0
) -> GainProfile:
    """Identify ``spec`` over the friction gain (module docstring); ``settings.f_tanh`` is the
    centre of the profile."""
    centre = settings.f_tanh
    if not SMOOTHED & set(spec.structure):
        ev = identify(spec, data, settings, seed)
        return GainProfile(centre, ev, ((centre, ev.rss),), timed_out=_stopped({centre: ev}))
    tried: dict[float, Evaluation] = {}

    def run(gain: float) -> None:
        if gain not in tried:
            tried[gain] = identify(spec, data, replace(settings, f_tanh=gain), seed)

    def best() -> float:
        return min(tried, key=lambda g: (_rss(tried[g]), abs(math.log(g / centre))))

    for factor in GAIN_FACTORS:
        run(centre * factor)
    middle = best()
    for factor in REFINE:
        run(middle * factor)
    for _ in range(PARABOLA_STEPS):
        vertex = _vertex(sorted((g, _rss(ev)) for g, ev in tried.items()), best())
        if vertex is None:
            break
        run(vertex)
    chosen = best()
    profile = tuple(sorted((g, ev.rss) for g, ev in tried.items()))
    return GainProfile(chosen, tried[chosen], profile, timed_out=_stopped(tried))


WARM_UP = (2.0, 5.0)
WARM_DOWN = (0.5, 0.2)
#: the warm profile narrows the bracket of its best gain until both neighbours lie within this
#: ratio of it (``_narrowed``), at most ``NARROW_STEPS`` refits: a machine's friction shape makes
#: the profile sharp. ``benchmarks/drive_gain_profile.py --seed 0 --machine 9`` (a two_mass+
#: viscous+stribeck machine, gain 40.9): its truth at 0.88, 0.95, 1, 1.03, 1.1x its gain fits
#: to RSS 0.0199, 0.0135, 0.0116, 0.0124, 0.0174, and the profile with one vertex ended at
#: 47.9 (RSS 0.0269), narrowed at 43.6 (0.0146; docs/drive.md)
GAIN_RTOL = 0.02
NARROW_STEPS = 6
#: neighbours within this relative RSS of the best: a level profile, not narrowed
FLAT = 1e-9


def warm_profile(
    spec: IndividualSpec, data: RecordingArrays, settings: GPSettings, seed: int = 0
) -> GainProfile:
    """``spec`` identified at ``settings.f_tanh`` with ``settings``, then refitted warm over the
    gain (module docstring); ``GainProfile.centre``: the first identification."""
    centre = settings.f_tanh
    first = identify(spec, data, settings, seed)
    if not SMOOTHED & set(spec.structure):
        return GainProfile(centre, first, ((centre, first.rss),), first, first.nfev, first.wall_s,
                           _stopped({centre: first}))  # fmt: skip
    ident = settings.identification
    warm = replace(settings, identification=replace(
        ident, n_starts=1, ladder_seed=False, backlash_smoothing=()))  # fmt: skip
    tried: dict[float, Evaluation] = {centre: first}

    def run(gain: float, origin: float) -> Evaluation:
        if gain not in tried:
            start = tuple(sorted(tried[origin].parameters.items()))
            again = IndividualSpec(tuple(spec.structure), start, refine=True)
            tried[gain] = identify(again, data, replace(warm, f_tanh=gain), seed)
        return tried[gain]

    def best() -> float:
        return min(tried, key=lambda g: (_rss(tried[g]), abs(math.log(g / centre))))

    for side in (WARM_UP, WARM_DOWN):
        origin = centre
        for factor in side:
            if _rss(run(centre * factor, origin)) >= _rss(tried[origin]):
                break
            origin = centre * factor
    middle = best()
    for factor in REFINE:
        run(middle * factor, middle)
    for _ in range(NARROW_STEPS):
        nxt = _narrowed(sorted((g, _rss(ev)) for g, ev in tried.items()), best())
        if nxt is None:
            break
        run(nxt, best())
    chosen = best()
    profile = tuple(sorted((g, ev.rss) for g, ev in tried.items()))
    nfev, wall = sum(ev.nfev for ev in tried.values()), sum(ev.wall_s for ev in tried.values())
    return GainProfile(chosen, tried[chosen], profile, first, int(nfev), float(wall),
                       _stopped(tried))  # fmt: skip


def _stopped(tried: dict[float, Evaluation]) -> tuple[float, ...]:
    """The gains of a profile whose identification stopped at its time limit."""
    return tuple(sorted(g for g, ev in tried.items() if ev.timed_out))


def _parabola(profile: list[tuple[float, float]], i: int) -> float | None:
    """The vertex (``log f_tanh``) of the parabola through ``log rss`` at the profile's
    point ``i`` and its neighbours, clipped to them; None where it is not convex."""
    x = np.log([g for g, _r in profile[i - 1 : i + 2]])
    y = np.log([max(r, 1e-300) for _g, r in profile[i - 1 : i + 2]])
    if not np.all(np.isfinite(y)):
        return None
    a, b, _c = np.polyfit(x, y, 2)
    return float(np.clip(-b / (2 * a), x[0], x[2])) if a > 0 else None


def _vertex(profile: list[tuple[float, float]], best: float) -> float | None:
    """The minimum of the parabola through ``log rss`` over ``log f_tanh`` at the best gain
    and its two neighbours in the profile (None at the profile's end, when not convex or when
    the vertex is within 1 % of a gain already tried)."""
    gains = [g for g, _r in profile]
    i = gains.index(best)
    if not 0 < i < len(gains) - 1:
        return None
    vertex = _parabola(profile, i)
    if vertex is None or min(abs(vertex - v) for v in np.log(gains)) < 0.01:
        return None
    return math.exp(vertex)


def _narrowed(profile: list[tuple[float, float]], best: float) -> float | None:
    """The next gain of the warm profile's narrowing in ``log f_tanh`` (Brent-like, without
    Brent's step-length safeguard: ``NARROW_STEPS`` bounds it): the vertex of the parabola
    through the best and its neighbours (``_parabola``) when it lies :data:`GAIN_RTOL` from
    every gain tried; a vertex next to the best is checked by the gain :data:`GAIN_RTOL` from
    the best on the vertex's side (then on the other); without a vertex the golden-section
    point of the wider side. None at the profile's end, once both neighbours lie within
    :data:`GAIN_RTOL` of the best, where the best's RSS is not finite (every fit failed) or
    where the three are level (the friction vanished: the gain changes nothing)."""
    gains = [g for g, _r in profile]
    i = gains.index(best)
    if not 0 < i < len(gains) - 1:
        return None
    near = [r for _g, r in profile[i - 1 : i + 2]]
    if not math.isfinite(near[1]) or max(near) <= near[1] * (1.0 + FLAT):
        return None
    left, right = math.log(best / gains[i - 1]), math.log(gains[i + 1] / best)
    tol = math.log1p(GAIN_RTOL) * (1 + 1e-9)
    if max(left, right) <= tol:
        return None
    x = math.log(best)
    vertex = _parabola(profile, i)
    if vertex is None:  # golden section of the wider side
        return math.exp(x + 0.381966 * (right if right >= left else -left))
    if min(abs(vertex - math.log(g)) for g in gains) >= tol:
        return math.exp(vertex)
    side = 1.0 if (vertex > x if min(left, right) > tol else right > tol) else -1.0
    return math.exp(x + side * math.log1p(GAIN_RTOL))


def _rss(ev: Evaluation) -> float:
    return ev.rss if math.isfinite(ev.rss) else math.inf

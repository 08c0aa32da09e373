"""The search's final stage (issue 26, ``GPSettings.final_top``): its best few structures, and
the best one's simpler neighbours, identified again as a named structure is, before the
answer is chosen.

Why: inside the search a structure gets a cheap identification (screening, one refinement of
40 evaluations, two starts); a multi-mass ladder or a backlash structure stalls there where
``drive fit``'s continuations (``structure_fit.CONTINUATION``: rounds of 100 evaluations,
starts from the fit of one inertia fewer and from a grid of springs) reach the noise floor. On the
recovery benchmark's machines (``benchmarks/drive_recovery.py search``) the search then
answered a richer structure whose extra submodels made up for the true one's stalled fit.

The stage: the ``final_top`` fittest refined structures of the search, every structure one
step simpler than the best (``operators.simplifications``) and the best with its current loop
swapped for a dead time or back, or its Stribeck torque without Coulomb friction for Coulomb
friction (``operators.swaps``: on seed-0 machine #2 the search had never fitted the truth, the
answer's swap; on EMPS with the wide boxes once the Coulomb model) are identified with the
continuations, without screening, each from its own parameters in the search or the best's,
inherited, whichever fits better (``IndividualSpec.also``: the search's fit may have
stalled; the best's alone where the search has none, profiled from the best's estimated
friction gain: ``nested_gain``); the fittest by the search's own fitness (paper eq. 19) becomes the best. When that moved, the new best's simpler
neighbours and swaps are identified likewise, at most
``final_rounds`` rounds in all. A fit of this stage replaces the search's fit of the same
structure where it is fitter (the evidence's rival table then uses it). Every fit is a row of
``StructureSearch.final_`` (``chosen``: the best after the stage).

The choice by the data's evidence (``GPSettings.final_alpha`` > 0, the ``data`` preset's 0.01;
``models.drivetrain.gp.selection``): after each round the fitness's answer moves to a richer
structure while one fits significantly better (F-test on the fitness RSS with the prefilter's
and the residual's effective sample count, Bonferroni over the richer candidates), among the
fittest refined fit of every structure the search and the stage made. So that the richer
structures the rule may move to are fitted as well as the answer, each round also identifies
again ``RICHER`` structures that contain the answer's (``operators.nests``: the F-test's
nested pairs; refined or only screened in the search), each from the answer's parameters
with what it adds switched off (``operators.switched_off``; from its estimated gain too), so
that its fit begins near the answer's RSS (until 2026-12-06 any structure with more
parameters, from its own parameters in the search; what that cost: docs/methods.md §2.4).
Which: those with the lowest p against the answer after a short fit from that start
(``screened``; up to ``SCREENED`` candidates, the full fits then start where the short ones
ended), not after the search's own fit, which may have stalled (docs/methods.md §2.4). Where
the answer's residuals pass the evidence's tests (white and independent of the input,
``fit_evidence.answer_residuals``: the data show nothing it misses), a candidate whose short
fit stays far from significance (p > :data:`P_REFIT`) is not refitted in full: on the recovery
benchmark's seed-1 machine #4 three refits (short-fit p 0.84, 1, 0.24) took 640 s of a 785 s
stage for nothing; with the rule its answer was white from the first round, its candidates'
short fits had p 0.70-1 and none was refitted (736 s against 1268 s). Not on the short fit's
p alone: a mass added with its spring stiffest cannot find its mode in a short fit, and the
refits that led to seed-0 #2's and #11's answers had short-fit p 1 and 0.91 (their answers'
residuals failing the tests). The next round's simpler neighbours and richer candidates are
those of the answer the rule chose. ``StructureSearch.selection_`` records the count, the
level and the moves.

Over the friction gain (``gp.final_gain``, the ``data`` preset's default): every fit of the
stage with Coulomb or Stribeck friction is profiled over the gain, and a fit at a gain it chose
counts it as a parameter (``n_params`` ``d + 1``, in the fitness and the F-test); the rows say
the gain (``f_tanh``) and whether it was estimated (``gain_estimated``).

An answer that fits to the fitness's floor (``selection.at_floor``: a noise-free recording's
exact fit, RSS below ``evaluate.FLOOR`` of the output's sum of squares) cannot be beaten by a
structure with as many parameters or more: eq. 19 charges such a fit at least the answer's
penalty, and the F-test counts RSS below the floor at it (``selection.fitness_rss``), so it
sees no drop. Those jobs are not run (``can_win``; what they cost: docs/methods.md §2.4).

Deterministic for a seed: the candidates are ordered, each identification is seeded by its
spec (``evaluate.spec_seed``), and the fits run on the search's own task runner.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd

from models.drivetrain.gp import final_gain, selection
from models.drivetrain.gp.continuation import SCREEN_NFEV
from models.drivetrain.gp.evaluate import Evaluation, IndividualSpec
from models.drivetrain.gp.operators import (
    from_structure,
    nests,
    simplifications,
    swaps,
    switched_off,
)
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.submodels import canonical

KEY = "final|"  # the stage's cache keys: this prefix and the structure
#: richer structures identified again per round for the evidence's choice (each a full fit
#: with continuations; a four-mass one costs 100-400 s on 2 shared cores, hence few)
RICHER = 2
#: richer candidates fitted briefly per round to choose those ``RICHER`` (``screened``)
SCREENED = 12
#: where the answer's residuals pass their tests (white, independent of the input), a
#: screened candidate is refitted in full only where its short fit's p against the answer is
#: at most this (:func:`run`, :func:`richer_jobs`)
P_REFIT = 0.5


def final_settings(settings: GPSettings) -> GPSettings:
    """``settings`` for the stage's fits: no screening, the continuations of a named
    structure's fit (``structure_fit.CONTINUATION``) but the search's own time limit."""
    from models.drivetrain.structure_fit import CONTINUATION  # it imports this package

    ident = settings.identification
    extra = {k: v for k, v in CONTINUATION.items() if k != "time_limit_s"}
    return replace(settings, identification=replace(ident, screen_nfev=0, **extra))


def key(structure: tuple[str, ...]) -> str:
    return KEY + json.dumps(list(structure))


def _spec(
    structure: tuple[str, ...], parameters: dict[str, float], f_tanh: float | None = None
) -> IndividualSpec:
    return IndividualSpec(tuple(structure), tuple(sorted(parameters.items())), refine=True,
                          f_tanh=f_tanh)  # fmt: skip


def nested_gain(answer: Evaluation) -> float | None:
    """The gain a fit started from ``answer``'s parameters is profiled from: the answer's,
    where the stage estimated it (``final_gain.estimated``; its parameters belong to that
    gain: on the recovery benchmark's seed-0 machine #9 the truth started from the answer
    without its gravity ended at RSS 0.0269 profiled from the preset's gain, 0.0117 from the
    answer's, docs/drive.md), else None (the stage's own)."""
    return final_gain.gain_of(answer, 0.0) if final_gain.estimated(answer) else None


def top_structures(evaluations: list[Evaluation], n: int) -> list[Evaluation]:
    """The ``n`` fittest refined evaluations of distinct structures (ties by structure)."""
    best: dict[tuple[str, ...], Evaluation] = {}
    for ev in evaluations:
        if ev.refined and (ev.structure not in best or ev.fitness > best[ev.structure].fitness):
            best[ev.structure] = ev
    ranked = sorted(best.values(), key=lambda ev: (-ev.fitness, ev.structure))
    return ranked[:n]


def candidates(
    best: Evaluation,
    evaluations: list[Evaluation],
    settings: GPSettings,
    done: set[tuple[str, ...]],
    top: int,
) -> list[tuple[str, IndividualSpec]]:
    """The stage's jobs ``(cache key, spec)`` of one round, none in ``done``: the ``top``
    fittest structures (0 after the first round), every structure one step simpler than
    ``best`` and its swaps (``operators.swaps``), each from its own parameters in the search
    or ``best``'s, inherited, whichever fits better (``IndividualSpec.also``; ``best``'s
    alone where the search has none)."""
    known = {ev.structure: ev.parameters for ev in sorted(evaluations, key=lambda e: e.fitness)}
    out: dict[tuple[str, ...], IndividualSpec] = {}
    for ev in top_structures(evaluations, top):
        out[ev.structure] = _spec(ev.structure, ev.parameters)
    centre, gain = from_structure(best.structure, best.parameters, settings), nested_gain(best)
    near = [(ind.structure, ind.parameters) for ind in simplifications(centre, settings)]
    for s, params in near + swaps(best.structure, best.parameters, settings):
        also = tuple(sorted(params.items()))
        out.setdefault(s, replace(_spec(s, known[s]), also=also) if s in known
                       else _spec(s, params, gain))  # fmt: skip
    return [(key(s), sp) for s, sp in sorted(out.items()) if s not in done]


COLUMNS = ["round", "codes", "names", "fitness", "rss", "n_params", "n_sub", "wall_s", "chosen",
           "f_tanh", "gain_estimated"]  # fmt: skip


def can_win(structure: tuple[str, ...], answer: Evaluation, settings: GPSettings) -> bool:
    """Whether a fit of ``structure`` could become the answer instead of ``answer``: not when
    the answer fits to the fitness's floor (``selection.at_floor``, a noise-free recording's
    exact fit) and ``structure`` has as many parameters or more (at the floor its fitness is
    at most the answer's, and a richer one's F-test sees no drop)."""
    if not selection.at_floor(answer, settings.k_p):
        return True
    return n_params(structure, settings) < answer.n_params


def n_params(structure: tuple[str, ...], settings: GPSettings) -> int:
    """The parameters of ``structure``'s model (an ``Evaluation``'s ``n_params`` without an
    estimated friction gain)."""
    return sum(len(settings.specs(kind)) for kind in canonical(structure))


def rows(evaluations: list[Evaluation], round_: int, f_tanh: float = 0.0) -> list[dict]:
    """The ``final_`` rows of one round's fits (``chosen`` set by the search at the end;
    ``f_tanh`` the gain of the fit, ``gain_estimated`` whether the stage chose it and counts
    it in ``n_params``, ``gp.final_gain``; ``f_tanh``: the search's gain)."""
    return [{"round": round_, "codes": ",".join(map(str, ev.codes)),
             "names": ",".join(ev.structure), "fitness": ev.fitness, "rss": ev.rss,
             "n_params": ev.n_params, "n_sub": ev.n_sub, "wall_s": ev.wall_s,
             "chosen": False, "f_tanh": final_gain.gain_of(ev, f_tanh),
             "gain_estimated": final_gain.estimated(ev)} for ev in evaluations]  # fmt: skip


def richer_jobs(
    answer: Evaluation, evaluations: list[Evaluation], n_eff: float, done: set[tuple[str, ...]],
    settings: GPSettings, n: int = RICHER, screen: Callable[[float], Any] | None = None,
    white: Callable[[Evaluation], bool] | None = None, p_refit: float = P_REFIT,
) -> list[tuple[str, IndividualSpec]]:  # fmt: skip
    """The stage's jobs for the evidence's choice: ``n`` structures that contain ``answer``'s
    (``operators.nests``; refined or only screened, none in ``done``), each from ``answer``'s
    parameters with what it adds switched off (``operators.switched_off``): the fit begins
    near the answer's RSS. Which ``n``: without ``screen``, those with the lowest p against the
    answer in the search (then the lowest RSS); with ``screen`` (``gain -> Dispatcher`` of
    short fits, :func:`screen_settings`) and more than ``n`` candidates, the :data:`SCREENED`
    first of that order (a stalled search fit, p 1, sorts after those that fit better: beyond
    12 candidates it can still be left out) are fitted briefly from that start
    (:func:`screened`) and the ``n`` with the lowest p after it are identified from their
    screened parameters; where ``white(answer)`` (its residuals pass their tests, asked only
    then) only those at ``p_refit`` or below."""
    best: dict[tuple[str, ...], Evaluation] = {}
    for ev in evaluations:
        if ev.structure not in best or ev.fitness > best[ev.structure].fitness:
            best[ev.structure] = ev
    d_answer = n_params(answer.structure, settings)  # the model's: a gain may count in answer
    richer = [ev for s, ev in best.items() if s not in done and n_params(s, settings) > d_answer
              and nests(s, answer.structure) and can_win(s, answer, settings)]  # fmt: skip
    gain = nested_gain(answer)

    def by_p(ev: Evaluation) -> tuple:  # the lowest p against the answer, then RSS
        return selection.p_value(answer, ev, n_eff, settings.k_p), ev.rss, ev.structure

    richer.sort(key=by_p)
    starts = []
    for ev in richer[: max(n, SCREENED) if screen is not None else n]:
        start = from_structure(ev.structure, answer.parameters, settings).parameters
        off = switched_off(ev.structure, start, set(answer.parameters), settings)
        starts.append(_spec(ev.structure, off, gain))
    if screen is not None and len(starts) > n:
        fits = screened(answer, starts, settings, screen)
        ranked = sorted(((ev, by_p(ev)) for ev in fits), key=lambda t: t[1])
        level = p_refit if white is not None and white(answer) else 1.0
        refit = [ev for ev, (p, *_) in ranked[:n] if p <= level]
        note = getattr(screen, "note", None)
        if note is not None:
            note(answer, [(ev, key_[0]) for ev, key_ in ranked], refit, level)
        starts = [_spec(ev.structure, ev.parameters, gain) for ev in refit]
    return [(key(sp.structure), sp) for sp in starts[:n]]


def screen_settings(settings: GPSettings, f_tanh: float) -> GPSettings:
    """``settings`` for :func:`screened`: one start of ``continuation.SCREEN_NFEV`` residual
    evaluations on the whole identification part at the friction gain ``f_tanh``, without
    screening, continuations or extensions (a short fit, a ranking)."""
    ident = replace(settings.identification, screen_nfev=0, n_starts=1, max_nfev=SCREEN_NFEV,
                    extend_rounds=0, backlash_smoothing=(), ladder_seed=False)  # fmt: skip
    return replace(settings, f_tanh=f_tanh, identification=ident)


class Screens:
    """The ``screen`` of :func:`run` for a search: ``screens(gain)`` is a new dispatcher
    ``make(screen_settings(settings, gain))`` of the short fits (one per round that screens);
    ``n_identifications`` counts them all, ``rows()`` lists them (``selection_["screened"]``:
    the structure, RSS and model parameter count of each short fit, in order; with the
    answer it was tested against, ``answer`` and ``answer_rss``, its ``p`` against it,
    whether it was ``refit`` in full and the threshold ``p_refit`` applied, where
    :func:`richer_jobs` noted them)."""

    def __init__(self, make: Callable[[GPSettings], Any], settings: GPSettings) -> None:
        self.make, self.settings = make, settings
        self.dispatchers: list[Any] = []
        self.notes: dict[tuple[int, tuple[str, ...]], dict] = {}

    def note(self, answer: Evaluation, fits: list[tuple[Evaluation, float]],
             refit: list[Evaluation], p_refit: float) -> None:  # fmt: skip
        """What the last call's short ``fits`` (each with its p against ``answer``) decided:
        those in ``refit`` are refitted in full, at most those at ``p_refit`` or below."""
        call, again = len(self.dispatchers) - 1, {ev.structure for ev in refit}
        for ev, p in fits:
            self.notes[(call, ev.structure)] = {
                "answer": ",".join(answer.structure), "answer_rss": float(answer.rss),
                "p": float(p), "refit": ev.structure in again, "p_refit": float(p_refit)}  # fmt: skip

    def __call__(self, gain: float) -> Any:
        self.dispatchers.append(self.make(screen_settings(self.settings, gain)))
        return self.dispatchers[-1]

    @property
    def n_identifications(self) -> int:
        return sum(d.n_identifications for d in self.dispatchers)

    @property
    def timed_out(self) -> list[Evaluation]:
        return [ev for d in self.dispatchers for ev in d.timed_out]

    def rows(self) -> list[dict]:
        return [{"call": i, "names": ",".join(ev.structure), "rss": float(ev.rss),
                 "n_params": int(ev.n_params)} | self.notes.get((i, ev.structure), {})
                for i, d in enumerate(self.dispatchers) for ev in d.cache.values()]  # fmt: skip


def screened(
    answer: Evaluation, specs: list[IndividualSpec], settings: GPSettings,
    screen: Callable[[float], Any],
) -> list[Evaluation]:  # fmt: skip
    """The short fits of ``specs`` (each from ``answer``'s parameters with what it adds
    switched off) at ``answer``'s gain, on a dispatcher ``screen(gain)``; charged ``d + 1``
    where the answer's gain was estimated (the full fit, profiled from it, will be:
    ``nested_gain``), else ``d`` (a full fit may still end at an estimated gain).

    Why: the search's own fit of a richer structure may have stalled above the answer's RSS
    (its p is then 1 whatever the structure could do); from (near) the answer's start it
    ends near or below it, so its p after a few steps says whether what it adds helps. On the
    recovery benchmark's seed-0 machine #11 the truth's search fit had stalled at RSS 1.018 (the
    answer's 0.478) and sorted last of 9 candidates (docs/drive.md)."""
    gain = final_gain.gain_of(answer, settings.f_tanh)
    jobs = [(key(sp.structure), replace(sp, f_tanh=None)) for sp in specs]
    dispatch = screen(gain)
    dispatch.run(jobs)
    extra, k_p = int(final_gain.estimated(answer)), settings.k_p
    out = []
    for k, _ in jobs:
        ev = dispatch.cache[k]
        fitness = final_gain.recharged(ev.fitness, k_p, ev.n_params, ev.n_params + extra)
        out.append(replace(ev, n_params=ev.n_params + extra, fitness=fitness))
    return out


def run(
    best: Evaluation, cache: dict[str, Evaluation], settings: GPSettings, dispatch: Any,
    n_eff: float = 0.0, screen: Callable[[float], Any] | None = None,
    white: Callable[[Evaluation], bool] | None = None,
) -> tuple[Evaluation, pd.DataFrame, list[selection.Step]]:  # fmt: skip
    """The stage (module docstring) from the search's ``best`` and its structure ``cache``
    (a fitter fit of the stage replaces the search's there); ``dispatch``: a
    ``gp.dispatch.Dispatcher`` with :func:`final_settings` and an empty cache of its own (None:
    the stage is off); ``n_eff``: the effective sample count of the evidence's choice (0: the
    fitness alone, as with ``final_alpha`` 0); ``screen``: ``gain -> Dispatcher`` of the
    richer candidates' short fits (:func:`richer_jobs`; None: chosen by the search's fits);
    ``white``: whether an answer's residuals pass their tests (then :data:`P_REFIT` applies;
    None: never). Returns the answer, the rows of
    ``StructureSearch.final_`` and the evidence's moves (``selection.Step``)."""
    alpha, k_p = (settings.final_alpha if n_eff > 0 else 0.0), settings.k_p
    fittest, out, table, steps = best, best, [], []
    done: set[tuple[str, ...]] = set()
    for r in range(max(1, settings.final_rounds) if dispatch is not None else 0):
        top = settings.final_top if r == 0 else 0
        jobs = candidates(out, list(cache.values()), settings, done, top)
        if alpha > 0:
            queued = {k for k, _ in jobs}
            jobs += [j for j in richer_jobs(out, list(cache.values()), n_eff, done, settings,
                                             screen=screen, white=white)
                     if j[0] not in queued]  # fmt: skip
            jobs.sort(key=lambda j: j[1].structure)
        jobs = [j for j in jobs if can_win(j[1].structure, out, settings)]
        if not jobs:
            break
        dispatch.run(jobs)
        evals = [dispatch.cache[k] for k, _ in jobs]
        done |= {ev.structure for ev in evals}
        table += rows(evals, r, settings.f_tanh)
        for ev in evals:
            k = json.dumps(list(ev.structure))
            if k not in cache or ev.fitness > cache[k].fitness:
                cache[k] = ev
        before = out.structure
        top_fit = max(evals, key=lambda ev: (ev.fitness, ev.structure))
        if top_fit.fitness > fittest.fitness:
            fittest = top_fit
        fits = selection.best_fits(list(cache.values()))
        fittest = next((ev for ev in fits if ev.structure == fittest.structure), fittest)
        out, moves = selection.choose(fittest, fits, n_eff, alpha, k_p)
        steps = moves
        if out.structure == before:
            break
    frame = pd.DataFrame(table, columns=COLUMNS)
    if len(frame):
        frame["chosen"] = frame["names"] == ",".join(out.structure)
    return out, frame, steps

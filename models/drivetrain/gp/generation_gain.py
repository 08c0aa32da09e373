"""The friction gain adapted during the search's generations (issue 26; docs/methods.md §2.8,
docs/drive.md "The friction gain in the final stage").

Why: the final stage (``gp.final_gain``) profiles the gain only of the structures the
generations proposed, and the generations fit friction at the preset's gain (``data`` preset:
``100 / v_max``). A machine whose friction turns over at another gain then never ranks its
true structure: on the recovery benchmark's seed 1 the truths of #6 and #7, fitted alone over
the gain, would have won the final stage, but were never its candidates.

What: after the generation ``ceil(f G) - 1`` for each ``f`` in ``AT`` (``G`` the generations;
only where a generation follows), the fittest friction-bearing structure of the generations
so far (since the last adopted gain; ties: the earliest) is identified over the gain as the
final stage does (``friction_gain.warm_profile``, one job on the search's task runner). When
the profile's gain pays for itself by eq. 19 (the fit at it, counting ``d + 1`` parameters, is
fitter than the fit at the current gain with ``d``: ``final_gain.identify_over_gain``), the
search continues at that gain: the jobs still running are waited for, every friction-bearing
structure's evaluation leaves the cache (it was at the old gain: the elites and the revisited
structures are identified again, so a generation's ranking is at one gain), the profiled fit
enters it (at the new gain, with ``d``), and the best so far is the fittest of the
generations' structures still cached and that fit.

Accounting: once a gain was adopted, every friction-bearing fit of the search is at an
estimated gain: before the final stage they are charged one parameter (:meth:`charge`), and
the final stage's fit at the centre counts ``d + 1`` too (``final_gain``'s
``centre_estimated``). ``rows`` (``friction_gain_["generations"]``, the checkpoint's
``friction_gain``) record every profile: generation, structure, the gain before, the gain
after, whether adopted, the profile; the history's ``f_tanh`` the gain of each generation.

Only with ``StructureSearch(friction_gain="adapt")`` (opt-in: on the recovery benchmark's seed 1
it left the exact count at 4/8 and cost more, docs/methods.md §2.8), where the final stage
profiles (``final_gain.profiles``) and the structure cache is on: the default ``auto``, the
reference, EMPS and ``--paper`` searches never adapt.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from typing import Any

from models.drivetrain.gp import final_gain
from models.drivetrain.gp.dispatch import Dispatcher
from models.drivetrain.gp.evaluate import Evaluation, IndividualSpec, RecordingArrays

#: fractions of the generations after which the gain is profiled (generation ceil(f G) - 1)
AT = (0.3,)


def generations_at(n: int) -> tuple[int, ...]:
    """The generation indices after which the gain is profiled (a generation follows each)."""
    return tuple(sorted({g for f in AT if 0 <= (g := math.ceil(f * n) - 1) < n - 1}))


def _smoothed(structure: Any) -> bool:
    from models.drivetrain.friction_gain import SMOOTHED  # it imports this package

    return bool(SMOOTHED & set(structure))


def _fitness(row: dict) -> float:
    f = float(row["fitness"])
    return f if math.isfinite(f) else -math.inf


class GenerationGain:
    """One search's gain adaptation (module docstring); ``on``: ``final_gain.profiles`` and
    the structure cache."""

    def __init__(self, on: bool, generations: int) -> None:
        self.at = generations_at(generations) if on else ()
        self.rows: list[dict] = []

    @property
    def adopted(self) -> bool:
        return any(r["adopted"] for r in self.rows)

    def gain(self, preset: float) -> float:
        """The search's gain now: the last adopted one, else ``preset``."""
        return next((r["f_tanh"] for r in reversed(self.rows) if r["adopted"]), float(preset))

    def adapt(
        self, search: Any, g: int, pop_rows: list[dict], data: RecordingArrays, best: Evaluation
    ) -> Evaluation:
        """After generation ``g``: profile and maybe adopt (module docstring); the best so far."""
        if g not in self.at:
            return best
        since = max((r["generation"] for r in self.rows if r["adopted"]), default=-1)
        rows = [r for r in pop_rows if r["generation"] > since
                and _smoothed(r["names"].split(","))]  # fmt: skip
        old = float(search.settings.f_tanh)
        if not rows:
            self.rows.append({"generation": g, "structure": None, "from_f_tanh": old,
                              "f_tanh": old, "adopted": False, "profile": []})  # fmt: skip
            return best
        row = max(rows, key=_fitness)  # the first of the fittest: the earliest
        structure = tuple(row["names"].split(","))
        start = tuple(sorted((str(k), float(v)) for k, v in row["parameters"].items()))
        fn = final_gain.batch_function(search._recording, data, search.settings, search.seed)
        dispatch = Dispatcher(fn, {}, 1, map_batches=search.map_batches,
                              submit_batch=search.submit_batch)  # fmt: skip
        dispatch.run([("gain", IndividualSpec(structure, start, refine=True))])
        ev = dispatch.cache["gain"]
        adopted = final_gain.estimated(ev)
        new = final_gain.gain_of(ev, old) if adopted else old
        self.rows.append({"generation": g, "structure": row["names"], "from_f_tanh": old,
                          "f_tanh": new, "adopted": adopted,
                          "profile": [[x, r if math.isfinite(r) else None]
                                      for x, r in getattr(ev, "gain_profile", ())]})  # fmt: skip
        search._dispatch.n_identifications += dispatch.n_identifications
        search._dispatch.timed_out += dispatch.timed_out
        if not adopted:
            return best
        search._dispatch.wait(list(search._dispatch.pending))  # at the old gain: evicted below
        for k in [k for k, e in search._cache.items() if _smoothed(e.structure)]:
            del search._cache[k]
        count, stops = search._dispatch.n_identifications, search._dispatch.timed_out
        search.settings = replace(search.settings, f_tanh=new)
        search._dispatch = search._dispatcher(data)
        search._dispatch.n_identifications, search._dispatch.timed_out = count, stops
        plain = _uncharged(ev, search.settings.k_p)
        search._cache[json.dumps(list(structure))] = plain
        known = {json.dumps(r["names"].split(",")) for r in pop_rows} & search._cache.keys()
        return max([plain, *(search._cache[k] for k in sorted(known))],
                   key=lambda e: (e.fitness, ",".join(e.structure)))  # fmt: skip

    def charge(self, cache: dict[str, Evaluation], best: Evaluation, settings: Any) -> Evaluation:
        """With an adopted gain (``settings.f_tanh``), every friction-bearing fit in ``cache``
        and ``best`` counts it (``d + 1``, eq. 19's penalty); ``best`` returned charged."""
        if not self.adopted:
            return best
        for k, ev in cache.items():
            cache[k] = _charged(ev, settings.f_tanh, settings.k_p)
        return _charged(best, settings.f_tanh, settings.k_p)

    def state(self) -> list[dict]:
        return self.rows

    def restore(self, search: Any, rows: Any) -> None:
        """A checkpoint's ``rows`` (absent: none); with an adopted gain the search's settings
        take it (the search then makes its dispatcher). A row that does not parse raises
        ``TypeError``/``KeyError``/``ValueError``."""
        self.rows = [{"generation": int(r["generation"]), "structure": r["structure"],
                      "from_f_tanh": _gain(r["from_f_tanh"]), "f_tanh": _gain(r["f_tanh"]),
                      "adopted": bool(r["adopted"]), "profile": list(r["profile"])}
                     for r in (rows or [])]  # fmt: skip
        search.settings = replace(search.settings, f_tanh=self.gain(search._preset.f_tanh))


def _gain(value: Any) -> float:
    g = float(value)
    if not (math.isfinite(g) and g > 0):
        raise ValueError(f"friction gain {value!r} is not a positive number")
    return g


def _plain_fields(ev: Evaluation) -> dict:
    return {f.name: getattr(ev, f.name) for f in fields(Evaluation)}


def _uncharged(ev: Evaluation, k_p: float) -> Evaluation:
    """The profile's fit as a generation's evaluation: at its gain, ``d`` parameters."""
    d = ev.n_params - 1
    fitness = final_gain.recharged(ev.fitness, k_p, d + 1, d)
    return replace(Evaluation(**_plain_fields(ev)), n_params=d, fitness=fitness)


def _charged(ev: Evaluation, f_tanh: float, k_p: float) -> Evaluation:
    if not _smoothed(ev.structure) or final_gain.estimated(ev):
        return ev
    d = ev.n_params
    fitness = final_gain.recharged(ev.fitness, k_p, d, d + 1)
    return final_gain.with_gain(ev, f_tanh, True, (), n_params=d + 1, fitness=fitness)

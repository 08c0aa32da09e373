"""``StructureSearch``: the degenerate GP over drive-train structures (scikit-learn style).

One generation: evaluate every individual -> record history -> offspring
(``models.drivetrain.gp.breeding``: elites, clones and crossover children, mutation, parents by
``settings.selection``). Identified parameters are written back into the nodes (inheritance:
the next identification of a changed structure starts from them).

Evaluation (beyond the paper, see ``GPSettings``/``IdentificationSettings``; all switchable):
each structure is identified once per search (``structure_cache``); new structures get a
cheap screening identification (``screen_nfev``) and promising ones a full one (with
``refine_at_once`` in the same call, once the screened fitness reaches the previous
generation's ``refine_top``-th best, else the ``refine_top`` fittest after the screening); a
new individual whose structure is already in the population or was identified before is
mutated again (``avoid_duplicates``/``avoid_revisits``), so every evaluation explores a new
structure near its parents. Batches are balanced by estimated cost (``balanced_batches``), at
most ``ceil(population / batch_size)``; with ``breed_ahead`` the last offspring of a breeding
are bred for the generation after next and started after the next generation's individuals,
so that an asynchronous backend (``submit_batch``, ``models.drivetrain.gp.dispatch``) keeps
its workers busy while the search waits for a generation's last identifications and breeds.

Determinism: one ``numpy.random.Generator(seed)`` drives every structural decision in a fixed
order; identification restarts are seeded by a hash of (seed, structure, start values), so
results do not depend on evaluation order, on timing or on the backend (``map_batches`` or
``submit_batch``). A checkpoint is written after every generation (JSON: population with
parameters, RNG state, history, the evaluated structures, the adopted gain); a new search
with the same ``checkpoint_dir``, settings, seed and data resumes where it stopped and reaches
the same result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from models.drivetrain.gp import (
    checkpoint_fields,
    final_gain,
    finalists,
    generation_gain,
    selection,
    widening,
)
from models.drivetrain.gp.breeding import initial_population, offspring
from models.drivetrain.gp.checkpoint import FILE as CHECKPOINT_FILE
from models.drivetrain.gp.checkpoint import data_fingerprint, load_checkpoint, save_checkpoint
from models.drivetrain.gp.dispatch import Dispatcher, MapBatches, SubmitBatch
from models.drivetrain.gp.dispatch import serial_map as serial_map  # re-exported
from models.drivetrain.gp.evaluate import (
    Evaluation,
    IndividualSpec,
    RecordingArrays,
    refinement,
    stopped,
)
from models.drivetrain.gp.operators import from_structure, neighbours
from models.drivetrain.gp.recording import as_arrays, batch_function
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.tree import Individual
from models.drivetrain.kit import assemble
from models.drivetrain.product import DriveModel
from models.drivetrain.simulate import simulate


class StructureSearch:
    """Structure and parameter identification by degenerate GP.

    Parameters: ``population``, ``generations``, ``seed``, ``test_fraction`` and any other
    :class:`GPSettings` field as keyword (or a whole ``settings``); ``map_batches(fn, batches)
    -> results`` evaluates batches (lists of :class:`IndividualSpec`) possibly in parallel, or
    ``submit_batch(fn, batch) -> future`` starts one (``future.result()``: its evaluations);
    the search is the same on either, only ``submit_batch`` lets work overlap the breeding;
    ``friction_gain`` (``auto``, ``fixed``, ``profile``, ``adapt``): the friction gain profiled
    in the final stage (``gp.final_gain``), with ``adapt`` in the generations too (``gp.generation_gain``);
    ``batch_size`` individuals per batch; ``checkpoint_dir`` enables resume; ``progress(g,
    n_generations, best: Evaluation)`` is called after every generation.

    Fitted attributes: ``best_structure_`` (names), ``best_codes_``, ``best_parameters_``,
    ``best_fitness_``, ``best_rss_``, ``best_evaluation_``, ``history_`` (a row per generation),
    ``population_history_`` (a row per individual and generation), ``state_space_`` (JSON-able
    A, B, C, D at the identified values, f and g as strings), ``polish_`` (the local search
    after the last generation, ``GPSettings.polish_rounds``: a row per neighbour, ``chosen``
    where it moved), ``final_`` (the final stage's fits, ``GPSettings.final_top``),
    ``selection_`` (its choice by the evidence, ``final_alpha``: samples, level, moves),
    ``friction_gain_`` (the answer's gain, ``gp.final_gain.record``, the settings carry it),
    ``best_output_`` (the best model's velocity over the recording from the measured initial
    one), ``model_`` (a ``models.drivetrain.product.DriveModel``), ``n_evaluations_``,
    ``timed_out_`` (the structures whose identification stopped at its time limit, one entry
    per stopped evaluation, a resumed checkpoint's included: the answer may then depend on the
    machine's load), ``resumed_from_``, ``widened_`` (the first answer where the search ran
    again at a wider prefilter, ``gp.widening``; None).

    ``fit`` takes a recording table, plain ``RecordingArrays`` or a stored ``RecordingFile``;
    with a file, the workers get the file's path and hash instead of the arrays.
    """

    def __init__(
        self,
        population: int = 6,
        generations: int = 20,
        seed: int = 0,
        test_fraction: float = 0.0,
        *,
        settings: GPSettings | None = None,
        map_batches: MapBatches | None = None,
        submit_batch: SubmitBatch | None = None,
        batch_size: int = 1,
        checkpoint_dir: str | Path | None = None,
        progress: Callable[[int, int, Evaluation], None] | None = None,
        friction_gain: str = "auto",
        **overrides: Any,
    ) -> None:
        base = settings or GPSettings()
        self.settings = replace(base, population=population, generations=generations,
                                test_fraction=test_fraction, **overrides)  # fmt: skip
        final_gain.profiles(self.settings, friction_gain)  # an unknown mode: InputError
        self.friction_gain, self._preset, self.seed = friction_gain, self.settings, int(seed)
        self.map_batches, self.submit_batch = map_batches, submit_batch
        self.batch_size = max(1, int(batch_size))
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.progress = progress

    # -- evaluation -------------------------------------------------------------------------
    def _key(self, spec: IndividualSpec) -> str:
        return json.dumps(list(spec.structure)) if self.settings.structure_cache else spec.key()

    def _spec(self, ind: Individual, refine_above: float | None) -> IndividualSpec:
        return IndividualSpec(ind.structure, tuple(sorted(ind.parameters.items())),
                              refine_above=refine_above)  # fmt: skip

    def _key_of(self, ind: Individual) -> str:
        return self._key(self._spec(ind, None))

    def _evaluate(
        self,
        population: Sequence[Individual],
        refine_above: float | None = None,
        ahead: Sequence[Individual] = (),
    ) -> list:
        """Evaluations of ``population`` (new structures identified). With ``refine_above``
        the workers refine the new structures whose screened fitness reaches it in the same
        call; without, the ``refine_top`` fittest not yet refined ones are refined after.
        ``ahead``: individuals of a later generation, started after these."""
        known = self._cache.keys() | self._dispatch.pending.keys()
        # an individual bred ahead that a resume starts again keeps the threshold it was first
        # started with (while it runs, it is pending and not started again)
        specs = [self._spec(ind, self._resumed_above.get(self._key_of(ind), refine_above))
                 for ind in population]  # fmt: skip
        todo = {self._key(sp): sp for sp in reversed(specs) if self._key(sp) not in known}
        n_new = len({self._key(sp) for sp in specs} - self._cache.keys())
        later: dict[str, IndividualSpec] = {}
        for sp in (self._spec(ind, refine_above) for ind in ahead):
            if self._key(sp) not in known and self._key(sp) not in todo:
                later[self._key(sp)] = sp
        self._dispatch.run(list(todo.items()), list(later.items()))
        self._dispatch.wait([self._key(sp) for sp in specs])
        if self._refining() and refine_above is None:
            ranked: dict[str, Evaluation] = {}
            for sp in specs:
                ranked.setdefault(self._key(sp), self._cache[self._key(sp)])
            order = sorted(ranked, key=lambda k: (-ranked[k].fitness, k))
            top = [k for k in order[: self.settings.refine_top] if not ranked[k].refined]
            self._dispatch.run([(k, refinement(ranked[k])) for k in top])
        self._new_in_generation = n_new
        return [self._cache[self._key(sp)] for sp in specs]

    def _refining(self) -> bool:
        """Whether the search has a refinement stage (screening on, ``refine_top > 0``)."""
        return bool(self.settings.identification.screen_nfev and self.settings.refine_top)

    def _refine_threshold(self, fitness: dict[str, float]) -> float | None:
        """The next generation's ``refine_above``: the ``refine_top``-th best fitness of this
        one (``fitness``: structure -> fitness), None without ``refine_at_once``."""
        if not (self.settings.refine_at_once and self._refining() and fitness):
            return None
        ranked = sorted(fitness.values(), reverse=True)
        return ranked[min(self.settings.refine_top, len(ranked)) - 1]

    def _dispatcher(
        self, data: RecordingArrays, settings: GPSettings | None = None,
        cache: dict[str, Evaluation] | None = None, over_gain: bool = False,
    ) -> Dispatcher:  # fmt: skip
        """The search's dispatcher (``settings``, ``cache``: the search's unless given):
        workers get the data (or, for a stored recording, its path and hash: they read the
        file once each), settings and seed with every batch; ``over_gain``: they identify
        over the friction gain (``gp.final_gain``)."""
        settings = settings or self.settings
        fn = (final_gain.batch_function(self._recording, data, settings, self.seed,
                                        self._gain.adopted) if over_gain
              else batch_function(self._recording, data, settings, self.seed))  # fmt: skip
        cache = self._cache if cache is None else cache
        return Dispatcher(fn, cache, -(-self.settings.population // self.batch_size),
                          map_batches=self.map_batches, submit_batch=self.submit_batch)  # fmt: skip

    # -- the search -------------------------------------------------------------------------
    def fit(self, recording: Any) -> StructureSearch:
        """Run (or resume) the search on a drive recording; returns ``self``. With
        ``widen_prefilter``, where the answer's residual leaves a periodic component above the
        prefilter, once more at the cut-off that shows it (``widening``), whose answer stands
        where it explains that component: ``widened_`` then records both, else it is None."""
        data, self.widened_ = as_arrays(recording), None
        self._search(recording, data)
        widening.search_again(self, recording, data)
        return self

    def _search(self, recording: Any, data: RecordingArrays) -> None:
        self._recording = recording
        s = self.settings = self._preset  # the preset's gain (a fit may have chosen another)
        self._cache: dict[str, Evaluation] = {}
        self._resumed_above: dict[str, float | None] = {}  # see _restore
        on = self.friction_gain == "adapt" and final_gain.profiles(s, "adapt") and s.structure_cache
        self._gain = generation_gain.GenerationGain(on, s.generations)
        fingerprint = {"settings": s.to_dict(), "seed": self.seed, "data": data_fingerprint(data)}
        state = load_checkpoint(self.checkpoint_dir, fingerprint) if self.checkpoint_dir else None
        self.resumed_from_: int | None = None
        ahead: list[Individual] = []
        if state is None:
            rng = np.random.default_rng(self.seed)
            population = initial_population(s, rng)
            start, history, pop_rows, best = 0, [], [], None
        else:
            rng, population, ahead, best = self._restore(state)
            start, history = state["generation"], state["history"]
            pop_rows = state["population_rows"]
        self._dispatch = self._dispatcher(data)  # at the checkpoint's adopted gain, if any
        self._dispatch.timed_out += [ev for ev in self._cache.values() if ev.timed_out]  # resumed
        threshold = self._refine_threshold(
            {r["names"]: r["fitness"] for r in pop_rows if r["generation"] == start - 1}
        )
        for g in range(start, s.generations):
            evals = self._evaluate(population, threshold, ahead)
            population = [ind.with_parameters(ev.parameters) for ind, ev in zip(population, evals)]
            fitness = np.array([ev.fitness for ev in evals])
            best = self._record(g, evals, best, history, pop_rows)
            best = self._gain.adapt(self, g, pop_rows, data, best)  # gp.generation_gain
            threshold = self._refine_threshold({",".join(ev.structure): ev.fitness for ev in evals})
            if g + 1 < s.generations:
                n_ahead = min(s.breed_ahead, s.population - s.n_elite - 1)
                n_ahead = n_ahead if g + 2 < s.generations else 0
                seen = {ev.structure for ev in self._cache.values()}
                population, ahead = offspring(population, fitness, rng, s, seen, ahead, n_ahead)
            if self.checkpoint_dir:
                # the individuals bred ahead that are still running, with their thresholds
                pending = {k: sp.refine_above for k, (_, sp) in self._dispatch.pending.items()}
                save_checkpoint(self.checkpoint_dir, {
                    "fingerprint": fingerprint, "generation": g + 1, "rng": rng.bit_generator.state,
                    "population": [ind.to_dict() for ind in population], "history": history,
                    "population_rows": pop_rows, "best": best.to_dict(),
                    "evaluated": {k: ev.to_dict() for k, ev in self._cache.items()},
                    "ahead": [ind.to_dict() for ind in ahead], "refine_above": pending,
                    "friction_gain": self._gain.state(),
                })  # fmt: skip
            if self.progress:
                self.progress(g, s.generations, best)
        if best is None:  # generations <= the checkpoint's: nothing was evaluated
            raise InputError("the search evaluated no generation (check generations)")
        self._dispatch.wait(list(self._dispatch.pending))  # none is left: a safety net
        best = self._final(self._polish(best, data), data)
        self.n_evaluations_ = self._dispatch.n_identifications + self._n_final
        self.timed_out_ = stopped(self._dispatch.timed_out + self._final_timed_out)
        self._finish(best, history, pop_rows, data)

    def _restore(self, state: dict) -> tuple[Any, list, list, Evaluation | None]:
        """RNG, population, individuals bred ahead and best of a checkpoint; its evaluations
        into the cache, and into ``_resumed_above`` the refinement thresholds of the individuals
        bred ahead that were still running when it was written. A field that does not parse
        is an ``InputError`` naming the file and the field (the file is left as it is)."""
        try:
            got = checkpoint_fields.parse(state, lambda gain: self._gain.restore(self, gain))
        except checkpoint_fields.Damaged as exc:
            path = Path(self.checkpoint_dir or ".") / CHECKPOINT_FILE
            raise InputError(f"{path}: damaged checkpoint, field {exc.field!r} ({exc.cause!r}); "
                             "delete it to start over") from None  # fmt: skip
        self.resumed_from_ = got.generation
        self._cache.update(got.evaluated)
        self._resumed_above.update(got.above)
        return got.rng, got.population, got.ahead, got.best

    def _record(self, g: int, evals: list, best: Evaluation | None, history: list,
                pop_rows: list) -> Evaluation:  # fmt: skip
        """Append generation ``g``'s rows to ``pop_rows`` and ``history``; the best so far."""
        i_best = int(np.argmax([ev.fitness for ev in evals]))
        if best is None or evals[i_best].fitness > best.fitness:
            best = evals[i_best]
        for i, ev in enumerate(evals):
            pop_rows.append({"generation": g, "index": i, "codes": _codes(ev),
                             "names": ",".join(ev.structure), "fitness": ev.fitness,
                             "rss": ev.rss, "n_params": ev.n_params, "nfev": ev.nfev,
                             "wall_s": ev.wall_s, "refined": ev.refined,
                             "parameters": ev.parameters})  # fmt: skip
        gen_best = evals[i_best]
        history.append({
            "generation": g, "best_fitness": gen_best.fitness, "best_rss": gen_best.rss,
            "best_codes": _codes(gen_best), "best_names": ",".join(gen_best.structure),
            "overall_best_fitness": best.fitness, "overall_best_codes": _codes(best),
            "overall_best_names": ",".join(best.structure),
            "new_structures": self._new_in_generation,
            "evaluated_structures": len(self._cache), "f_tanh": self.settings.f_tanh,
        })  # fmt: skip
        return best

    def _polish(self, best: Evaluation, data: RecordingArrays) -> Evaluation:
        """Local search after the last generation (``GPSettings.polish_rounds``): evaluate the
        best's one-step neighbours like a generation and move to the fittest while it is
        fitter. Every evaluated neighbour is a row of ``polish_`` (``chosen``: moved there)."""
        rows: list[dict] = []
        for r in range(self.settings.polish_rounds):
            centre = from_structure(best.structure, best.parameters, self.settings)
            candidates = neighbours(centre, self.settings)
            if not candidates:
                break
            evals = self._evaluate(candidates)
            i = int(np.argmax([ev.fitness for ev in evals]))
            moved = evals[i].fitness > best.fitness
            rows += [{"round": r, "codes": _codes(ev), "names": ",".join(ev.structure),
                      "fitness": ev.fitness, "rss": ev.rss, "n_params": ev.n_params,
                      "refined": ev.refined, "chosen": moved and j == i}
                     for j, ev in enumerate(evals)]  # fmt: skip
            if not moved:
                break
            best = evals[i]
        self.polish_ = pd.DataFrame(rows, columns=["round", "codes", "names", "fitness", "rss",
                                                   "n_params", "refined", "chosen"])  # fmt: skip
        return best

    def _final(self, best: Evaluation, data: RecordingArrays) -> Evaluation:
        """The final stage (``GPSettings.final_top``, ``models.drivetrain.gp.finalists``) on
        the search's task runner, its answer by the data's evidence with ``final_alpha``
        (``models.drivetrain.gp.selection``); ``final_``: its rows; ``selection_``: the
        effective sample count, the level, the richer candidates the answer was tested
        against (``m``), the evidence's moves and the richer candidates' short fits
        (``screened``, ``finalists.Screens``), run on the same runner. Over the friction gain
        (``gp.final_gain``) the settings take the answer's gain."""
        s, over = self.settings, final_gain.profiles(self.settings, self.friction_gain)
        best = self._gain.charge(self._cache, best, s)  # an adopted gain counts (d + 1)
        fs = finalists.final_settings(s)
        dispatch = self._dispatcher(data, fs, {}, over) if s.final_top else None
        n_eff = selection.search_count(best, data, s) if dispatch and s.final_alpha > 0 else 0.0
        screen = finalists.Screens(lambda settings: self._dispatcher(data, settings, {}), fs)
        from models.drivetrain.fit_evidence import residuals_white  # it imports this package

        best, self.final_, steps = finalists.run(best, self._cache, s, dispatch, n_eff, screen,
                                                 residuals_white(data, s))  # fmt: skip
        self.selection_ = selection.record(best, list(self._cache.values()), n_eff, self._preset,
                                           steps) | {"screened": screen.rows()}  # fmt: skip
        self._n_final = screen.n_identifications + (dispatch.n_identifications if dispatch else 0)
        self._final_timed_out = screen.timed_out + (dispatch.timed_out if dispatch else [])
        self.friction_gain_ = final_gain.record(best, self._preset, self.friction_gain, over)
        self.friction_gain_ |= {"generations": self._gain.rows} if self._gain.at else {}
        self.settings = replace(s, f_tanh=self.friction_gain_["f_tanh"])
        return best

    def _finish(self, best: Evaluation, history: list, pop_rows: list,
                data: RecordingArrays) -> None:  # fmt: skip
        self.best_evaluation_ = best
        self.best_structure_, self.best_codes_ = list(best.structure), list(best.codes)
        self.best_parameters_, self.best_fitness_ = dict(best.parameters), float(best.fitness)
        self.best_rss_ = float(best.rss)
        self.history_ = pd.DataFrame(history)
        self.population_history_ = pd.DataFrame(pop_rows)
        model = assemble(best.structure, **self.settings.kit_options())
        self.state_space_ = model.numeric(best.parameters)
        self.best_output_ = simulate(best.structure, data.u, data.dt, best.parameters,
                                     y0=float(data.y[0]), n_sub=best.n_sub,
                                     **self.settings.kit_options())  # fmt: skip
        self.model_ = DriveModel.from_settings(
            best.structure, best.parameters, self.settings, data.dt,
            source=f"StructureSearch seed {self.seed}, {self.settings.population} x "
            f"{self.settings.generations}", n_sub=best.n_sub,
        )  # fmt: skip

    def summary(self) -> str:
        return (f"best {self.best_codes_} {self.best_structure_}: fitness {self.best_fitness_:.4g}, "
                f"RSS {self.best_rss_:.4g}; parameters "
                + ", ".join(f"{k}={v:.5g}" for k, v in self.best_parameters_.items()))  # fmt: skip

    def to_dict(self) -> dict:
        return {"best_structure": self.best_structure_, "best_codes": self.best_codes_,
                "parameters": self.best_parameters_, "rss": self.best_rss_,
                "fitness": self.best_fitness_, "generations": self.settings.generations,
                "settings": self.settings.to_dict(), "seed": self.seed,
                "state_space": self.state_space_, "friction_gain": self.friction_gain_,
                "widened": self.widened_, "timed_out": self.timed_out_}  # fmt: skip


def _codes(ev: Evaluation) -> str:
    return ",".join(str(c) for c in ev.codes)

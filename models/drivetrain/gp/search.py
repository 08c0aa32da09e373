"""``StructureSearch``: the degenerate GP over drive-train structures (scikit-learn style).

One generation: evaluate every individual -> record history -> offspring: ``n_elite`` best
unchanged (beyond the paper), ``N_clone ~ B(P - n_elite, p_clone)`` clones and the rest by
subtree crossover, parents by ``settings.selection`` (tournament by default, the paper's raw
roulette as an option); then point / insertion / deletion / chromosome mutation of every new
individual; with ``simplify_best`` one crossover slot goes to a structure one step simpler
than the best (beyond the paper). Identified parameters are written back into the nodes
(inheritance: the next identification of a changed structure starts from them).

Evaluation (beyond the paper, see ``GPSettings``/``IdentificationSettings``; all switchable):
each structure is identified once per search (``structure_cache``); new structures get a
cheap screening identification (``screen_nfev``) and promising ones a full one (with
``refine_at_once`` in the same call, once the screened fitness reaches the previous
generation's ``refine_top``-th best, else the ``refine_top`` fittest after the screening); a
new individual whose structure is already in the population or was identified before is
mutated again (``avoid_duplicates``/``avoid_revisits``), so every evaluation explores a new
structure near its parents. Batches for ``map_batches`` are
balanced by estimated cost (``balanced_batches``), at most ``ceil(population / batch_size)``.

Determinism: one ``numpy.random.Generator(seed)`` drives every structural decision in a fixed
order; identification restarts are seeded by a hash of (seed, structure, start values), so
results do not depend on evaluation order or on the ``map_batches`` backend. A checkpoint is
written after every generation (JSON: population with parameters, RNG state, history, the
evaluated structures); a new search with the same ``checkpoint_dir``, settings, seed and data
resumes where it stopped and reaches the same result.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from models.drivetrain.gp.checkpoint import data_fingerprint, load_checkpoint, save_checkpoint
from models.drivetrain.gp.evaluate import (
    Evaluation,
    IndividualSpec,
    RecordingArrays,
    evaluate_batch,
    refinement,
)
from models.drivetrain.gp.operators import (
    crossover,
    from_structure,
    mutate,
    mutate_once,
    neighbours,
    random_individual,
    select,
    simplifications,
)
from models.drivetrain.gp.recording import RecordingFile, as_arrays, evaluate_stored
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.tree import Individual, pick
from models.drivetrain.kit import assemble
from models.drivetrain.product import DriveModel
from models.drivetrain.simulate import simulate

MapBatches = Callable[[Callable, list], list]


def serial_map(fn: Callable, batches: list) -> list:
    """The default ``map_batches``: evaluate batches one after another in this process."""
    return [fn(b) for b in batches]


def balanced_batches(todo: list[IndividualSpec], n_batches: int) -> list[list[IndividualSpec]]:
    """Split ``todo`` into at most ``n_batches`` non-empty batches of similar cost (longest
    processing time first, cost ~ number of parameters squared; deterministic)."""
    n_batches = max(1, min(n_batches, len(todo)))
    batches: list[list[IndividualSpec]] = [[] for _ in range(n_batches)]
    loads = [0.0] * n_batches
    for spec in sorted(todo, key=lambda sp: (-len(sp.start), sp.key())):
        i = loads.index(min(loads))
        batches[i].append(spec)
        loads[i] += (1 + len(spec.start)) ** 2
    return batches


class StructureSearch:
    """Structure and parameter identification by degenerate GP.

    Parameters: ``population``, ``generations``, ``seed``, ``test_fraction`` and any other
    :class:`GPSettings` field as keyword (or a whole ``settings``); ``map_batches(fn, batches)
    -> results`` evaluates batches (lists of :class:`IndividualSpec`) possibly in parallel;
    ``batch_size`` individuals per batch; ``checkpoint_dir`` enables resume; ``progress(g,
    n_generations, best: Evaluation)`` is called after every generation.

    Fitted attributes: ``best_structure_`` (names), ``best_codes_``, ``best_parameters_``,
    ``best_fitness_``, ``best_rss_``, ``best_evaluation_``, ``history_`` (one row per
    generation), ``population_history_`` (one row per individual and generation),
    ``state_space_`` (JSON-able A, B, C, D at the identified values, f and g as strings),
    ``polish_`` (the local search after the last generation: one row per evaluated neighbour,
    ``chosen`` where it moved, see ``GPSettings.polish_rounds``),
    ``best_output_`` (the best model's simulated velocity over the whole recording, from the
    measured initial velocity), ``model_`` (the best model as a product,
    ``models.drivetrain.product.DriveModel``), ``n_evaluations_``, ``resumed_from_``.

    ``fit`` takes a recording table, plain ``RecordingArrays`` or a stored ``RecordingFile``;
    with a file, ``map_batches`` ships the file's path and hash instead of the arrays.
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
        batch_size: int = 1,
        checkpoint_dir: str | Path | None = None,
        progress: Callable[[int, int, Evaluation], None] | None = None,
        **overrides: Any,
    ) -> None:
        base = settings or GPSettings()
        self.settings = replace(base, population=population, generations=generations,
                                test_fraction=test_fraction, **overrides)  # fmt: skip
        self.seed = int(seed)
        self.map_batches = map_batches
        self.batch_size = max(1, int(batch_size))
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir else None
        self.progress = progress

    # -- evaluation -------------------------------------------------------------------------
    def _key(self, spec: IndividualSpec) -> str:
        return json.dumps(list(spec.structure)) if self.settings.structure_cache else spec.key()

    def _evaluate(
        self,
        population: Sequence[Individual],
        data: RecordingArrays,
        refine_above: float | None = None,
    ) -> list:
        """Evaluations of ``population`` (new structures identified). With ``refine_above``
        the workers refine the new structures whose screened fitness reaches it in the same
        call; without, the ``refine_top`` fittest not yet refined ones are refined after."""
        specs = [IndividualSpec(ind.structure, tuple(sorted(ind.parameters.items())),
                                refine_above=refine_above) for ind in population]  # fmt: skip
        todo = {self._key(sp): sp for sp in reversed(specs) if self._key(sp) not in self._cache}
        self._run(list(todo.items()), data)
        n_new = len(todo)
        if self._refining() and refine_above is None:
            ranked: dict[str, Evaluation] = {}
            for sp in specs:
                ranked.setdefault(self._key(sp), self._cache[self._key(sp)])
            order = sorted(ranked, key=lambda k: (-ranked[k].fitness, k))
            top = [k for k in order[: self.settings.refine_top] if not ranked[k].refined]
            self._run([(k, refinement(ranked[k])) for k in top], data)
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

    def _run(self, jobs: list[tuple[str, IndividualSpec]], data: RecordingArrays) -> None:
        """Identify ``(cache key, spec)`` jobs through ``map_batches``; results into the cache."""
        if not jobs:
            return
        keys = {sp.key(): k for k, sp in jobs}
        todo = sorted((sp for _, sp in jobs), key=lambda sp: sp.key())
        batches = balanced_batches(todo, -(-self.settings.population // self.batch_size))
        fn: Callable[[list[IndividualSpec]], list[Evaluation]]
        if isinstance(self._recording, RecordingFile):  # workers read the file, once each
            fn = functools.partial(
                evaluate_stored, recording=self._recording, settings=self.settings, seed=self.seed
            )
        else:
            fn = functools.partial(
                evaluate_batch, data=data, settings=self.settings, seed=self.seed
            )
        results = (self.map_batches or serial_map)(fn, batches)
        for batch, evals in zip(batches, results):
            for spec, ev in zip(batch, evals):
                self._cache[keys[spec.key()]] = ev
                # a screening refined in the same call counts as two identifications
                self.n_evaluations_ += 1 + (spec.refine_above is not None and ev.refined)

    def _novel(self, ind: Individual, taken: set, rng) -> Individual:
        """A structure not in ``taken``: ``ind`` itself, else one extra mutation of ``ind``
        (up to ``novelty_tries`` draws, each from ``ind``: stay close to the parent), else a
        chain of mutations (up to ``novelty_tries`` more steps)."""
        if ind.structure not in taken:
            return ind
        tries = self.settings.novelty_tries
        for _ in range(tries):
            child = mutate_once(ind, self.settings, rng)
            if child.structure not in taken:
                return child
        for _ in range(tries):
            ind = mutate_once(ind, self.settings, rng)
            if ind.structure not in taken:
                break
        return ind

    def _initial(self, rng) -> list[Individual]:
        """Random initial trees; with ``avoid_duplicates`` a repeated structure is redrawn
        (up to ``novelty_tries`` times)."""
        population: list[Individual] = []
        for _ in range(self.settings.population):
            ind = random_individual(self.settings, rng)
            for _ in range(self.settings.novelty_tries if self.settings.avoid_duplicates else 0):
                if ind.structure not in {i.structure for i in population}:
                    break
                ind = random_individual(self.settings, rng)
            population.append(ind)
        return population

    def _offspring(self, population: list[Individual], fitness: np.ndarray, rng) -> list:
        s = self.settings
        order = np.argsort(-fitness, kind="stable")
        elites = [population[i] for i in order[: s.n_elite]]
        n_rest = s.population - s.n_elite
        n_clone = int(rng.binomial(n_rest, s.p_clone))
        new = [population[i] for i in select(fitness, rng, n_clone, s)]
        for _ in range(n_rest - n_clone):
            a, b = select(fitness, rng, 2, s)
            new.append(crossover(population[a], population[b], s, rng))
        out = list(elites)
        seen = {ev.structure for ev in self._cache.values()}
        if s.simplify_best and new:
            simpler = [
                c for c in simplifications(population[order[0]], s) if c.structure not in seen
            ]
            if simpler:  # one slot (a crossover child, else a clone) tries a simpler best
                out.append(pick(rng, simpler))
                new.pop()
        for ind in new:
            ind = mutate(ind, s, rng)
            taken = ({i.structure for i in out} if s.avoid_duplicates else set()) | (
                seen if s.avoid_revisits else set()
            )
            out.append(self._novel(ind, taken, rng) if taken else ind)
        return out

    # -- the search -------------------------------------------------------------------------
    def fit(self, recording: Any) -> StructureSearch:
        """Run (or resume) the search on a drive recording; returns ``self``."""
        data = as_arrays(recording)
        self._recording = recording
        s = self.settings
        self._cache: dict[str, Evaluation] = {}
        self.n_evaluations_ = 0
        fingerprint = {"settings": s.to_dict(), "seed": self.seed, "data": data_fingerprint(data)}
        state = load_checkpoint(self.checkpoint_dir, fingerprint) if self.checkpoint_dir else None
        self.resumed_from_ = None
        if state is None:
            rng = np.random.default_rng(self.seed)
            population = self._initial(rng)
            start, history, pop_rows, best = 0, [], [], None
        else:
            rng = np.random.default_rng()
            rng.bit_generator.state = state["rng"]
            population = [Individual.from_dict(d) for d in state["population"]]
            start, history, pop_rows = (
                state["generation"],
                state["history"],
                state["population_rows"],
            )
            best = _evaluation(state["best"]) if state["best"] else None
            self.resumed_from_ = start
            self._cache = {k: _evaluation(v) for k, v in state.get("evaluated", {}).items()}
        threshold = self._refine_threshold(
            {r["names"]: r["fitness"] for r in pop_rows if r["generation"] == start - 1}
        )
        for g in range(start, s.generations):
            evals = self._evaluate(population, data, threshold)
            population = [ind.with_parameters(ev.parameters) for ind, ev in zip(population, evals)]
            fitness = np.array([ev.fitness for ev in evals])
            i_best = int(np.argmax(fitness))
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
                "evaluated_structures": len(self._cache),
            })  # fmt: skip
            threshold = self._refine_threshold({",".join(ev.structure): ev.fitness for ev in evals})
            if g + 1 < s.generations:
                population = self._offspring(population, fitness, rng)
            if self.checkpoint_dir:
                save_checkpoint(self.checkpoint_dir, {
                    "fingerprint": fingerprint, "generation": g + 1, "rng": rng.bit_generator.state,
                    "population": [ind.to_dict() for ind in population], "history": history,
                    "population_rows": pop_rows, "best": best.to_dict(),
                    "evaluated": {k: ev.to_dict() for k, ev in self._cache.items()},
                })  # fmt: skip
            if self.progress:
                self.progress(g, s.generations, best)
        if best is None:  # generations <= the checkpoint's: nothing was evaluated
            raise InputError("the search evaluated no generation (check generations)")
        best = self._polish(best, data)
        self._finish(best, history, pop_rows, data)
        return self

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
            evals = self._evaluate(candidates, data)
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

    def _finish(
        self, best: Evaluation, history: list, pop_rows: list, data: RecordingArrays
    ) -> None:
        self.best_evaluation_ = best
        self.best_structure_ = list(best.structure)
        self.best_codes_ = list(best.codes)
        self.best_parameters_ = dict(best.parameters)
        self.best_fitness_ = float(best.fitness)
        self.best_rss_ = float(best.rss)
        self.history_ = pd.DataFrame(history)
        self.population_history_ = pd.DataFrame(pop_rows)
        model = assemble(best.structure, **self.settings.kit_options())
        self.state_space_ = model.numeric(best.parameters)
        self.best_output_ = simulate(
            best.structure,
            data.u,
            data.dt,
            best.parameters,
            y0=float(data.y[0]),
            **self.settings.kit_options(),
        )
        self.model_ = DriveModel.from_settings(
            best.structure, best.parameters, self.settings, data.dt,
            source=f"StructureSearch seed {self.seed}, {self.settings.population} x "
            f"{self.settings.generations}",
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
                "state_space": self.state_space_}  # fmt: skip


def _evaluation(d: dict) -> Evaluation:
    return Evaluation(**{**d, "structure": tuple(d["structure"]), "codes": tuple(d["codes"])})


def _codes(ev: Evaluation) -> str:
    return ",".join(str(c) for c in ev.codes)

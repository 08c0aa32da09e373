"""``StructureSearch``: the degenerate GP over drive-train structures (scikit-learn style).

One generation: evaluate (identify + fitness) every individual -> record history ->
offspring: ``n_elite`` best unchanged (beyond the paper), ``N_clone ~ B(P - n_elite, p_clone)``
clones and the rest by subtree crossover, parents by roulette wheel; then point / insertion /
deletion / chromosome mutation of every new individual. Identified parameters are written
back into the nodes (inheritance: the next identification starts from them).

Determinism: one ``numpy.random.Generator(seed)`` drives every structural decision in a fixed
order; identification restarts are seeded by a hash of (seed, structure, start values), so
results do not depend on evaluation order or on the ``map_batches`` backend. A checkpoint is
written after every generation (JSON: population with parameters, RNG state, history); a new
search with the same ``checkpoint_dir``, settings, seed and data resumes where it stopped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from methods.gp.checkpoint import data_fingerprint, load_checkpoint, save_checkpoint
from methods.gp.evaluate import Evaluation, IndividualSpec, RecordingArrays, evaluate_batch
from methods.gp.operators import crossover, mutate, random_individual, roulette
from methods.gp.settings import GPSettings
from methods.gp.tree import Individual
from models.drivetrain.kit import assemble

MapBatches = Callable[[Callable, list], list]


def serial_map(fn: Callable, batches: list) -> list:
    """The default ``map_batches``: evaluate batches one after another in this process."""
    return [fn(b) for b in batches]


def as_arrays(recording: Any) -> RecordingArrays:
    """A validated drive recording (DataFrame, see ``schemas.drive``) as plain arrays."""
    if isinstance(recording, RecordingArrays):
        return recording
    if not isinstance(recording, pd.DataFrame):
        raise InputError("fit() expects a drive-recording DataFrame or RecordingArrays")
    from schemas.drive import validate_drive_recording

    frame = validate_drive_recording(recording, source="recording")
    t = frame["t_s"].to_numpy(float)
    return RecordingArrays(
        u=frame["torque_Nm"].to_numpy(float).copy(),
        y=frame["velocity_rad_s"].to_numpy(float).copy(),
        dt=float((t[-1] - t[0]) / (t.size - 1)),
    )


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
    ``n_evaluations_``, ``resumed_from_``.
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
    def _evaluate(self, population: Sequence[Individual], data: RecordingArrays) -> list:
        specs = [IndividualSpec(ind.structure, tuple(sorted(ind.parameters.items())))
                 for ind in population]  # fmt: skip
        todo = sorted({s.key(): s for s in specs if s.key() not in self._cache}.values(),
                      key=lambda s: (-len(s.start), s.key()))  # fmt: skip
        if todo:
            batches = [todo[i :: max(1, -(-len(todo) // self.batch_size))] for i in
                       range(min(len(todo), max(1, -(-len(todo) // self.batch_size))))]  # fmt: skip
            fn = functools.partial(evaluate_batch, data=data, settings=self.settings,
                                   seed=self.seed)  # fmt: skip
            results = (self.map_batches or serial_map)(fn, batches)
            for batch, evals in zip(batches, results):
                for spec, ev in zip(batch, evals):
                    self._cache[spec.key()] = ev
        self.n_evaluations_ += len(todo)
        return [self._cache[s.key()] for s in specs]

    def _offspring(self, population: list[Individual], fitness: np.ndarray, rng) -> list:
        s = self.settings
        order = np.argsort(-fitness, kind="stable")
        elites = [population[i] for i in order[: s.n_elite]]
        n_rest = s.population - s.n_elite
        n_clone = int(rng.binomial(n_rest, s.p_clone))
        new = [population[i] for i in roulette(fitness, rng, n_clone)]
        for _ in range(n_rest - n_clone):
            a, b = roulette(fitness, rng, 2)
            new.append(crossover(population[a], population[b], s, rng))
        return elites + [mutate(ind, s, rng) for ind in new]

    # -- the search -------------------------------------------------------------------------
    def fit(self, recording: Any) -> StructureSearch:
        """Run (or resume) the search on a drive recording; returns ``self``."""
        data = as_arrays(recording)
        s = self.settings
        self._cache: dict[str, Evaluation] = {}
        self.n_evaluations_ = 0
        fingerprint = {"settings": s.to_dict(), "seed": self.seed, "data": data_fingerprint(data)}
        state = load_checkpoint(self.checkpoint_dir, fingerprint) if self.checkpoint_dir else None
        self.resumed_from_ = None
        if state is None:
            rng = np.random.default_rng(self.seed)
            population = [random_individual(s, rng) for _ in range(s.population)]
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
            best = Evaluation(**{**state["best"], "structure": tuple(state["best"]["structure"]),
                                 "codes": tuple(state["best"]["codes"])}) if state["best"] else None  # fmt: skip
            self.resumed_from_ = start
        for g in range(start, s.generations):
            evals = self._evaluate(population, data)
            population = [ind.with_parameters(ev.parameters) for ind, ev in zip(population, evals)]
            fitness = np.array([ev.fitness for ev in evals])
            i_best = int(np.argmax(fitness))
            if best is None or evals[i_best].fitness > best.fitness:
                best = evals[i_best]
            for i, ev in enumerate(evals):
                pop_rows.append({"generation": g, "index": i, "codes": _codes(ev),
                                 "names": ",".join(ev.structure), "fitness": ev.fitness,
                                 "rss": ev.rss, "n_params": ev.n_params,
                                 "parameters": ev.parameters})  # fmt: skip
            gen_best = evals[i_best]
            history.append({
                "generation": g, "best_fitness": gen_best.fitness, "best_rss": gen_best.rss,
                "best_codes": _codes(gen_best), "best_names": ",".join(gen_best.structure),
                "overall_best_fitness": best.fitness, "overall_best_codes": _codes(best),
                "overall_best_names": ",".join(best.structure),
            })  # fmt: skip
            if g + 1 < s.generations:
                population = self._offspring(population, fitness, rng)
            if self.checkpoint_dir:
                save_checkpoint(self.checkpoint_dir, {
                    "fingerprint": fingerprint, "generation": g + 1, "rng": rng.bit_generator.state,
                    "population": [ind.to_dict() for ind in population], "history": history,
                    "population_rows": pop_rows, "best": best.to_dict(),
                })  # fmt: skip
            if self.progress:
                self.progress(g, s.generations, best)
        self._finish(best, history, pop_rows)
        return self

    def _finish(self, best: Evaluation, history: list, pop_rows: list) -> None:
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


def _codes(ev: Evaluation) -> str:
    return ",".join(str(c) for c in ev.codes)

"""Breeding of the degenerate GP: the random initial population and each next generation.

One breeding: ``n_elite`` best unchanged (beyond the paper), ``N_clone ~ B(n_rest, p_clone)``
clones and the rest by subtree crossover, parents by ``settings.selection``; then point /
insertion / deletion / chromosome mutation of every new individual; with ``simplify_best``
one crossover slot goes to a structure one step simpler than the best; with
``avoid_duplicates``/``avoid_revisits`` a new individual whose structure is taken is mutated
again (``novel``). One ``numpy.random.Generator`` drives every decision in a fixed order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.drivetrain.gp.operators import (
    crossover,
    mutate,
    mutate_once,
    random_individual,
    select,
    simplifications,
)
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.tree import Individual, pick


def novel(ind: Individual, taken: set, rng, settings: GPSettings) -> Individual:
    """A structure not in ``taken``: ``ind`` itself, else one extra mutation of ``ind`` (up to
    ``novelty_tries`` draws, each from ``ind``: stay close to the parent), else a chain of
    mutations (up to ``novelty_tries`` more steps)."""
    if ind.structure not in taken:
        return ind
    tries = settings.novelty_tries
    for _ in range(tries):
        child = mutate_once(ind, settings, rng)
        if child.structure not in taken:
            return child
    for _ in range(tries):
        ind = mutate_once(ind, settings, rng)
        if ind.structure not in taken:
            break
    return ind


def initial_population(settings: GPSettings, rng) -> list[Individual]:
    """Random initial trees; with ``avoid_duplicates`` a repeated structure is redrawn (up to
    ``novelty_tries`` times)."""
    population: list[Individual] = []
    for _ in range(settings.population):
        ind = random_individual(settings, rng)
        for _ in range(settings.novelty_tries if settings.avoid_duplicates else 0):
            if ind.structure not in {i.structure for i in population}:
                break
            ind = random_individual(settings, rng)
        population.append(ind)
    return population


def offspring(
    population: list[Individual],
    fitness: np.ndarray,
    rng,
    settings: GPSettings,
    seen: set,
    carried: Sequence[Individual] = (),
    n_ahead: int = 0,
) -> tuple[list[Individual], list[Individual]]:
    """The next generation - elites, the ``carried`` individuals (bred ahead by the last
    breeding) and new ones - and, apart, the last ``n_ahead`` new ones: bred now for the
    generation after it (``GPSettings.breed_ahead``). ``seen``: the structures identified so
    far (not tried again with ``avoid_revisits``, nor as the simpler best)."""
    s = settings
    order = np.argsort(-fitness, kind="stable")
    elites = [population[i] for i in order[: s.n_elite]]
    n_rest = s.population - s.n_elite - len(carried) + n_ahead
    n_clone = int(rng.binomial(n_rest, s.p_clone))
    new = [population[i] for i in select(fitness, rng, n_clone, s)]
    for _ in range(n_rest - n_clone):
        a, b = select(fitness, rng, 2, s)
        new.append(crossover(population[a], population[b], s, rng))
    out = [*elites, *carried]
    seen = seen | {i.structure for i in carried}
    if s.simplify_best and new:
        simpler = [c for c in simplifications(population[order[0]], s) if c.structure not in seen]
        if simpler:  # one slot (a crossover child, else a clone) tries a simpler best
            out.append(pick(rng, simpler))
            new.pop()
    for ind in new:
        ind = mutate(ind, s, rng)
        taken = ({i.structure for i in out} if s.avoid_duplicates else set()) | (
            seen if s.avoid_revisits else set()
        )
        out.append(novel(ind, taken, rng, s) if taken else ind)
    return out[: len(out) - n_ahead], out[len(out) - n_ahead :]

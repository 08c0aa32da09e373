"""Every genetic operator yields individuals that satisfy the construction rules."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from methods.gp.operators import (
    chromosome_mutation,
    crossover,
    deletion_mutation,
    insertion_mutation,
    mutate,
    point_mutation,
    random_individual,
    roulette,
)
from methods.gp.settings import GPSettings
from methods.gp.tree import Individual

SETTINGS = GPSettings(p_point=0.5, p_insertion=0.5, p_deletion=0.5, p_chromosome=0.5)
OPERATORS = [point_mutation, insertion_mutation, deletion_mutation, chromosome_mutation, mutate]


def _check(ind: Individual) -> None:
    assert ind.is_valid(), f"invalid individual {ind} {ind.nodes}"
    for node in ind.nodes:  # parameters inside their bounds
        for spec in SETTINGS.specs(node.kind):
            value = dict(node.params)[spec.name]
            assert spec.lower <= value <= spec.upper


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 6))
def test_any_chain_of_operators_keeps_the_rules(seed, steps):
    rng = np.random.default_rng(seed)
    a, b = random_individual(SETTINGS, rng), random_individual(SETTINGS, rng)
    _check(a)
    _check(b)
    for _ in range(steps):
        op = OPERATORS[int(rng.integers(len(OPERATORS)))]
        a = op(a, SETTINGS, rng)
        _check(a)
        c = crossover(a, b, SETTINGS, rng)
        _check(c)
        a, b = c, a


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_restricted_function_set_is_respected(seed):
    rng = np.random.default_rng(seed)
    small = GPSettings(allowed=("one_mass", "two_mass", "coulomb", "viscous"))
    ind = random_individual(small, rng)
    for _ in range(5):
        ind = crossover(mutate(ind, small, rng), random_individual(small, rng), small, rng)
        assert ind.is_valid() and set(ind.structure) <= set(small.allowed)


def test_roulette_is_proportional_to_fitness():
    rng = np.random.default_rng(1)
    picks = roulette(np.array([1.0, 3.0, 0.0, np.nan]), rng, 20000)
    # binomial std of the share of index 1 is sqrt(.75*.25/2e4) ~ 0.003: 0.02 is > 6 sigma
    assert abs(np.mean(picks == 1) - 0.75) < 0.02 and not np.any(picks >= 2)


def test_individual_round_trips_through_dict():
    ind = random_individual(SETTINGS, np.random.default_rng(5))
    assert Individual.from_dict(ind.to_dict()) == ind

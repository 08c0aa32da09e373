"""Every genetic operator yields individuals that satisfy the construction rules."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from models.drivetrain.gp.operators import (
    chromosome_mutation,
    crossover,
    deletion_mutation,
    insertion_mutation,
    mutate,
    mutate_once,
    point_mutation,
    random_individual,
    rank_weights,
    roulette,
    select,
    simplifications,
)
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.tree import Individual, Node
from models.drivetrain.submodels import Submodel

SETTINGS = GPSettings(p_point=0.5, p_insertion=0.5, p_deletion=0.5, p_chromosome=0.5)
OPERATORS = [point_mutation, insertion_mutation, deletion_mutation, chromosome_mutation, mutate,
             mutate_once]  # fmt: skip


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


def test_rank_weights_are_linear_in_rank_and_ignore_the_scale_of_fitness():
    # fitness spanning 1e8 (one exact fit among poor ones) gets the same weights as 1, 2, 3
    w = rank_weights(np.array([1e-3, 1e8, 2e-3, np.nan]), pressure=2.0)
    np.testing.assert_allclose(w, [2 / 3, 2.0, 4 / 3, 0.0])
    assert rank_weights(np.array([5.0, 1.0]), 1.0).tolist() == [1.0, 1.0]  # no pressure


def test_selection_schemes_prefer_the_fittest_but_not_exclusively():
    rng = np.random.default_rng(0)
    fitness = np.array([1e-3, 1e8, 2e-3, 3e-3])
    share = {}
    for scheme in ("roulette", "rank", "tournament"):
        s = GPSettings(selection=scheme, tournament_size=2)
        share[scheme] = np.mean(select(fitness, rng, 4000, s) == 1)
    assert share["roulette"] > 0.999  # raw fitness: the exact fit takes over
    # rank (pressure 2): 2 / 4 = 0.5; tournament of 2: 1 - (3/4)^2 = 0.4375; 4000 draws give a
    # binomial std below 0.008, so 0.03 is ~4 sigma
    assert abs(share["rank"] - 0.5) < 0.03 and abs(share["tournament"] - 0.4375) < 0.03


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutate_once_changes_at_most_one_step(seed):
    rng = np.random.default_rng(seed)
    ind = random_individual(SETTINGS, rng)
    child = mutate_once(ind, SETTINGS, rng)
    _check(child)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_simplifications_are_valid_and_exactly_one_step_simpler(seed):
    rng = np.random.default_rng(seed)
    ind = random_individual(SETTINGS, rng)
    masses = {n.kind: Submodel(n.kind).n_masses for n in ind.nodes if Submodel(n.kind).n_masses}
    ((mass_kind, n_masses),) = masses.items()
    others = sorted(k for k in ind.structure if k != mass_kind)
    expected = [("del", k) for k in others]
    if n_masses > 1 and not (n_masses == 2 and "backlash" in others):
        expected.append(("merge", mass_kind))
    found = []
    for simpler in simplifications(ind, SETTINGS):
        _check(simpler)
        gone = sorted(set(ind.structure) - set(simpler.structure))
        if len(simpler.nodes) == len(ind.nodes) - 1:  # one non-mass submodel deleted
            (kind,) = gone
            found.append(("del", kind))
        else:  # same nodes, one inertia fewer
            assert gone == [mass_kind] and len(simpler.nodes) == len(ind.nodes)
            (new_mass,) = (k for k in simpler.kinds if k.n_masses)
            assert new_mass.n_masses == n_masses - 1
            found.append(("merge", mass_kind))
        # everything kept keeps its parameters (the identification starts at the best's fit)
        kept = ind.parameters
        for name, value in simpler.parameters.items():
            if name in kept and name != f"J{n_masses - 1}":
                assert value == kept[name]
    assert sorted(found) == sorted(expected)


def test_merging_inertias_adds_the_last_two_within_the_bounds():
    two = Individual((Node("two_mass", -1, (("J1", 0.01), ("J2", 0.02), ("c1", 50.0),
                                            ("d1", 0.05))),
                      Node("viscous", 0, (("f_v", 0.01),))))  # fmt: skip
    merged = [s for s in simplifications(two, SETTINGS) if "one_mass" in s.structure]
    assert merged[0].parameters == {"J1": 0.02, "f_v": 0.01}  # 0.03 clipped to 2 x 0.01
    three = Individual((Node("three_mass", -1, (("J1", 0.01), ("J2", 0.015), ("J3", 0.02),
                                                ("c1", 40.0), ("c2", 60.0), ("d1", 0.04),
                                                ("d2", 0.06))),))  # fmt: skip
    (to_two,) = simplifications(three, SETTINGS)
    assert to_two.parameters == {"J1": 0.01, "J2": 0.035, "c1": 40.0, "d1": 0.04}

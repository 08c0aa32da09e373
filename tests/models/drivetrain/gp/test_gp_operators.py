"""Every genetic operator yields individuals that satisfy the construction rules."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from models.drivetrain.gp.operators import (
    chromosome_mutation,
    crossover,
    deletion_mutation,
    from_structure,
    insertion_mutation,
    mutate,
    mutate_once,
    neighbours,
    point_mutation,
    random_individual,
    rank_weights,
    roulette,
    select,
    simplifications,
)
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.tree import Individual, Node
from models.drivetrain.submodels import MULTI_MASS, Submodel

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


def _branch(nodes: list[Node], i: int) -> set[int]:
    """Node ``i`` and its descendants (a parent precedes its children)."""
    out = {i}
    for j in range(i + 1, len(nodes)):
        if nodes[j].parent in out:
            out.add(j)
    return out


def _without(nodes: list[Node], dropped: set[int]) -> tuple[list[Node], dict[int, int]]:
    """``nodes`` minus ``dropped`` in their order, each kept node under its nearest kept
    ancestor (the first kept node is the root; a node without kept ancestor hangs under it)."""
    out: list[Node] = []
    index: dict[int, int] = {}
    for j, node in enumerate(nodes):
        if j in dropped:
            continue
        parent = node.parent
        while parent in dropped:
            parent = nodes[parent].parent
        index[j] = len(out)
        out.append(replace(node, parent=index.get(parent, 0) if out else -1))
    return out, index


def _is_mass(node: Node) -> bool:
    return Submodel(node.kind) in MULTI_MASS


def _fresh(new: list[Node], old: list[Node]) -> bool:
    """New nodes get freshly drawn parameters: none repeats an old node's kind and values."""
    return not {(n.kind, n.params) for n in new} & {(n.kind, n.params) for n in old}


def _new_branch(new: list[Node], start: int, attach: int) -> bool:
    """``new`` (appended at ``start``) is one branch under ``attach``; a trailing multi-mass
    node (``repair``) may hang anywhere."""
    tree = new[:-1] if _is_mass(new[-1]) and len(new) > 1 else new
    return tree[0].parent == attach and all(
        start <= n.parent < start + k for k, n in enumerate(tree[1:], 1)
    )


def _steps(before: Individual, after: Individual) -> set[str]:
    """The single mutation steps of ``operators.mutate_once`` that turn ``before`` into
    ``after``: ``point`` (one node's kind redrawn in place, multi-mass for multi-mass, nothing
    else changed), ``insertion`` (one non-mass leaf appended), ``deletion`` (one non-mass node
    removed, its children moved to its parent), ``chromosome`` (one node's branch replaced by
    a new branch of >= 1 fresh nodes under the same parent, everything else kept), ``none``."""
    b, a = list(before.nodes), list(after.nodes)
    found = {"none"} if a == b else set()
    changed = [j for j in range(len(b)) if len(a) == len(b) and a[j] != b[j]]
    if len(changed) == 1:
        old, new = b[changed[0]], a[changed[0]]
        if (new.parent == old.parent and new.kind != old.kind
                and _is_mass(new) == _is_mass(old) and _fresh([new], b)):  # fmt: skip
            found.add("point")
    if a[:-1] == b and len(a) == len(b) + 1 and not _is_mass(a[-1]) and _fresh(a[-1:], b):
        found.add("insertion")
    for i, node in enumerate(b):
        if not _is_mass(node) and a == _without(b, {i})[0]:
            found.add("deletion")
        kept, index = _without(b, _branch(b, i))
        attach = -1 if not kept else max(0, index.get(node.parent, -1))
        new = a[len(kept) :]
        if (
            a[: len(kept)] == kept
            and new
            and _fresh(new, b)
            and _new_branch(new, len(kept), attach)
        ):
            found.add("chromosome")
    return found


KIND_CHANGES = {"none": (0, 0), "point": (1, 1), "insertion": (0, 1), "deletion": (1, 0)}


def test_mutate_once_changes_at_most_one_step():
    # 2000 random trees from one seeded generator; the four operators are equally likely
    # (SETTINGS), so each step is seen ~500 times and a second change would show up
    rng = np.random.default_rng(2024)
    seen: Counter[str] = Counter()
    for _ in range(2000):
        ind = random_individual(SETTINGS, rng)
        child = mutate_once(ind, SETTINGS, rng)
        _check(child)
        steps = _steps(ind, child)
        assert steps, f"more than one step: {ind.nodes} -> {child.nodes}"
        # the kinds: a point step swaps one, an insertion adds one, a deletion drops one (a
        # chromosome step drops only kinds of the replaced branch: the rest is kept, _steps)
        gone = Counter(ind.structure) - Counter(child.structure)
        added = Counter(child.structure) - Counter(ind.structure)
        counts = (gone.total(), added.total())
        assert "chromosome" in steps or counts in {KIND_CHANGES[s] for s in steps}
        seen.update(steps)
    assert min(seen[s] for s in ("point", "insertion", "deletion", "chromosome")) > 100, seen


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


def test_neighbours_are_every_valid_structure_one_step_away():
    gp = GPSettings(max_nodes=4, init_max_nodes=4, allowed=("one_mass", "two_mass", "three_mass", "coulomb",
                                                "viscous", "stribeck", "backlash"))  # fmt: skip
    ind = from_structure(["two_mass", "coulomb", "viscous"], {"J1": 0.011, "M_C": 0.3}, gp)
    assert ind.is_valid() and ind.parameters["J1"] == 0.011 and ind.parameters["f_v"] > 0
    found = {n.structure: n for n in neighbours(ind, gp)}
    assert set(found) == {
        ("two_mass", "coulomb"), ("two_mass", "viscous"),  # one submodel deleted
        ("one_mass", "coulomb", "viscous"),  # one inertia fewer
        ("three_mass", "coulomb", "viscous"),  # one inertia more
        ("two_mass", "coulomb", "viscous", "stribeck"),  # one submodel added
        ("two_mass", "coulomb", "viscous", "backlash"),
    }  # fmt: skip
    assert all(n.is_valid() for n in found.values())
    # inherited where the parameter exists, nominal where it is new
    nominal = {s.name: s.nominal for s in gp.specs("stribeck")}
    added = found[("two_mass", "coulomb", "viscous", "stribeck")].parameters
    assert added["M_C"] == 0.3 and added["M_S"] == nominal["M_S"]
    assert found[("one_mass", "coulomb", "viscous")].parameters["M_C"] == 0.3
    # at max_nodes nothing is added; the ladder can still grow
    full = from_structure(["two_mass", "coulomb", "viscous", "stribeck"], {}, gp)
    grown = {n.structure for n in neighbours(full, gp)}
    assert ("three_mass", "coulomb", "viscous", "stribeck") in grown
    assert all(len(s) <= 4 for s in grown)

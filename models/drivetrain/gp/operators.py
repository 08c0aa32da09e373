"""Genetic operators that respect the construction rules (paper §3.2).

Every operator returns a valid individual: nodes that would break a rule are dropped, and a
multi-mass node is added at the end if none is left (one_mass, or a random multi-mass type
when backlash is present).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.tree import Individual, Node, graft, has_multi_mass, pick, remove, subtree
from models.drivetrain.submodels import MULTI_MASS, Submodel, can_add, canonical


def random_params(kind: Submodel | str, settings: GPSettings, rng: np.random.Generator):
    """Uniform in 50 %..200 % of nominal, clipped to the bounds (gravity: uniform in bounds)."""
    out = []
    for spec in settings.specs(kind):
        if spec.nominal == 0.0:
            lo, hi = spec.lower, spec.upper
        else:
            lo = max(spec.lower, min(0.5 * spec.nominal, 2.0 * spec.nominal))
            hi = min(spec.upper, max(0.5 * spec.nominal, 2.0 * spec.nominal))
        out.append((spec.name, float(rng.uniform(lo, hi))))
    return tuple(out)


def _allowed(settings: GPSettings) -> list[Submodel]:
    return [Submodel(k) for k in settings.allowed]


def addable(nodes: list[Node], settings: GPSettings, *, multi: bool = True) -> list[Submodel]:
    kinds = [Submodel(n.kind) for n in nodes]
    return [k for k in _allowed(settings)
            if can_add(kinds, k) and (multi or k not in MULTI_MASS)]  # fmt: skip


def new_node(kind: Submodel, parent: int, settings: GPSettings, rng: np.random.Generator) -> Node:
    return Node(kind.value, parent, random_params(kind, settings, rng))


def repair(nodes: list[Node], settings: GPSettings, rng: np.random.Generator) -> Individual:
    """Add a multi-mass node if none exists (the paper adds a one-mass system)."""
    if not has_multi_mass(nodes):
        options = [k for k in addable(nodes, settings) if k in MULTI_MASS]
        kind = Submodel.ONE_MASS if Submodel.ONE_MASS in options else pick(rng, options)
        parent = int(rng.integers(len(nodes))) if nodes else -1
        nodes = [*nodes, new_node(kind, parent, settings, rng)]
    return Individual(tuple(nodes))


def grow(nodes: list[Node], at: int, size: int, settings: GPSettings, rng) -> list[Node]:
    """Add up to ``size`` random valid nodes, the first under ``nodes[at]``, each further one
    under a random node of the new branch; stops early when nothing more can be added."""
    nodes = list(nodes)
    branch: list[int] = []
    for _ in range(size):
        options = addable(nodes, settings)
        if not options:
            break
        parent = at if not branch else pick(rng, branch)
        parent = -1 if not nodes else (parent if parent >= 0 else 0)
        branch.append(len(nodes))
        nodes.append(new_node(pick(rng, options), parent, settings, rng))
    return nodes


def random_individual(settings: GPSettings, rng: np.random.Generator) -> Individual:
    """Random tree of 1..init_max_nodes nodes with random parameters."""
    size = int(rng.integers(1, settings.init_max_nodes + 1))
    return repair(grow([], -1, size, settings, rng), settings, rng)


def crossover(a: Individual, b: Individual, settings: GPSettings, rng) -> Individual:
    """Copy ``a`` up to a random node; the branch behind it is replaced by a random branch of
    ``b`` (nodes breaking a rule are dropped)."""
    i = int(rng.integers(len(a.nodes)))
    j = int(rng.integers(len(b.nodes)))
    at_parent = a.nodes[i].parent
    kept, mapping = remove(a, subtree(a, i))
    branch_idx = subtree(b, j)
    local = {old: new for new, old in enumerate(branch_idx)}
    branch = [Node(b.nodes[k].kind, local.get(b.nodes[k].parent, -1), b.nodes[k].params)
              for k in branch_idx]  # fmt: skip
    at = mapping.get(at_parent, -1)
    return repair(graft(kept, at, branch), settings, rng)


def point_mutation(ind: Individual, settings: GPSettings, rng) -> Individual:
    """A random node gets a new random type (and random parameters) satisfying the rules."""
    candidates = []
    for i, node in enumerate(ind.nodes):
        others = [Submodel(n.kind) for k, n in enumerate(ind.nodes) if k != i]
        kind = Submodel(node.kind)
        options = [k for k in _allowed(settings) if k != kind and can_add(others, k)
                   and ((k in MULTI_MASS) == (kind in MULTI_MASS))]  # fmt: skip
        if options:
            candidates.append((i, options))
    if not candidates:
        return ind
    i, options = pick(rng, candidates)
    nodes = list(ind.nodes)
    nodes[i] = new_node(pick(rng, options), nodes[i].parent, settings, rng)
    return Individual(tuple(nodes))


def insertion_mutation(ind: Individual, settings: GPSettings, rng) -> Individual:
    """Add a random valid node under a random existing node (if any type fits)."""
    options = addable(list(ind.nodes), settings, multi=False)
    if not options or len(ind.nodes) >= settings.max_nodes:
        return ind
    parent = int(rng.integers(len(ind.nodes)))
    return Individual((*ind.nodes, new_node(pick(rng, options), parent, settings, rng)))


def deletion_mutation(ind: Individual, settings: GPSettings, rng) -> Individual:
    """Delete a random node whose removal keeps the rules (never the multi-mass node)."""
    deletable = [i for i, n in enumerate(ind.nodes) if Submodel(n.kind) not in MULTI_MASS]
    if not deletable:
        return ind
    nodes, _ = remove(ind, [pick(rng, deletable)])
    return Individual(tuple(nodes))


def _resized(ind: Individual, i: int, settings: GPSettings, step: int) -> list[Individual]:
    """``ind`` with its multi-mass node ``i`` replaced by the ladder with ``step`` (-1 or +1)
    inertias more, where the rules and the function set allow (else ``[]``). One fewer: the
    last two inertias merged (``J_{n-1} + J_n``); one more: the new inertia, spring and
    damper at their nominals; the other parameters inherited, clipped to the bounds."""
    node = ind.nodes[i]
    kind = Submodel(node.kind)
    new = next((k for k in MULTI_MASS if k.n_masses == kind.n_masses + step), None)
    others = [Submodel(n.kind) for k, n in enumerate(ind.nodes) if k != i]
    if new is None or new.value not in settings.allowed or not can_add(others, new):
        return []
    values, n = dict(node.params), kind.n_masses
    if step < 0:
        values[f"J{n - 1}"] = values.get(f"J{n - 1}", 0.0) + values.get(f"J{n}", 0.0)
    params = tuple(
        (spec.name, float(np.clip(values.get(spec.name, spec.nominal), spec.lower, spec.upper)))
        for spec in settings.specs(new)
    )
    nodes = list(ind.nodes)
    nodes[i] = Node(new.value, node.parent, params)
    return [Individual(tuple(nodes))]


def simplifications(ind: Individual, settings: GPSettings) -> list[Individual]:
    """Every structure one step simpler than ``ind`` (beyond the paper, for the search's
    ``simplify_best``): each non-mass node deleted, and the multi-mass node replaced by the
    ladder with one inertia fewer (``_resized``), where the rules and the function set allow.
    Parameters are inherited, so the identification starts next to ``ind``'s fit."""
    out = []
    for i, node in enumerate(ind.nodes):
        if Submodel(node.kind) in MULTI_MASS:
            out += _resized(ind, i, settings, -1)
        else:
            out.append(Individual(tuple(remove(ind, [i])[0])))
    return out


def extensions(ind: Individual, settings: GPSettings) -> list[Individual]:
    """Every structure one step richer than ``ind``: each allowed non-mass submodel added (at
    its nominal parameters, under the root) within ``max_nodes``, and the multi-mass node
    replaced by the ladder with one inertia more (``_resized``). Parameters of ``ind`` are
    inherited."""
    out = []
    if len(ind.nodes) < settings.max_nodes:
        for kind in addable(list(ind.nodes), settings, multi=False):
            params = tuple((spec.name, spec.nominal) for spec in settings.specs(kind))
            out.append(Individual((*ind.nodes, Node(kind.value, 0, params))))
    for i, node in enumerate(ind.nodes):
        if Submodel(node.kind) in MULTI_MASS:
            out += _resized(ind, i, settings, +1)
    return out


#: parts a recording tells apart only by their detail, each with the parameter a swap carries
#: across: input dynamics (below the lag's corner both shift the phase by ``omega T``), and a
#: Stribeck torque without Coulomb friction for Coulomb friction (the breakaway torque as the
#: Coulomb level; on EMPS with the wide boxes a search ended at one_mass+viscous+stribeck+
#: gravity, fitness 1.60, and never tried the Coulomb model, 1.75, 2026-12-07)
SWAPS = {Submodel.CURRENT_CONTROL: (Submodel.DELAY, "T_1", "T_d"),
         Submodel.DELAY: (Submodel.CURRENT_CONTROL, "T_d", "T_1"),
         Submodel.STRIBECK: (Submodel.COULOMB, "M_S", "M_C")}  # fmt: skip


def swaps(
    structure: Sequence[str], parameters: dict[str, float], settings: GPSettings
) -> list[tuple[tuple[str, ...], dict[str, float]]]:
    """The structures one swap from ``structure`` (:data:`SWAPS`: a current loop for a dead
    time or back, a Stribeck torque for Coulomb friction, where the rules and the function set
    allow and the other part is not there yet), each with ``parameters`` without the swapped
    part's and its carried parameter across (clipped to its box)."""
    kinds, allowed = canonical(structure), set(_allowed(settings))
    out = []
    for kind in kinds:
        if kind not in SWAPS or SWAPS[kind][0] not in allowed:
            continue
        other, old, new = SWAPS[kind]
        rest = [k for k in kinds if k != kind]
        if not can_add(rest, other):
            continue
        (spec,) = settings.specs(other)
        dropped = {sp.name for sp in settings.specs(kind)}
        params = {k: v for k, v in parameters.items() if k not in dropped}
        params[new] = min(max(float(parameters.get(old, spec.nominal)), spec.lower), spec.upper)
        out.append((tuple(k.value for k in canonical([*rest, other])), params))
    return out


def from_structure(structure, parameters: dict, settings: GPSettings) -> Individual:
    """An individual of ``structure`` (names or codes) carrying ``parameters`` (nominals where
    missing): the multi-mass node as root, every other submodel under it (the tree's shape
    has no meaning for the model)."""
    kinds = sorted(canonical(structure), key=lambda k: k not in MULTI_MASS)
    return Individual(tuple(
        Node(kind.value, -1 if i == 0 else 0,
             tuple((sp.name, float(parameters.get(sp.name, sp.nominal)))
                   for sp in settings.specs(kind)))
        for i, kind in enumerate(kinds)))  # fmt: skip


def switched_off(
    structure: Sequence[str], start: dict[str, float], inherited: set[str], settings: GPSettings
) -> dict[str, float]:
    """``start`` with every parameter not ``inherited`` at the end of its box where it acts
    least: springs stiffest, the offset torque 0, everything else smallest; a new inertia
    ``J{k}`` is taken from ``J{k-1}`` (the total kept where the boxes allow)."""
    out = dict(start)
    specs = {sp.name: sp for kind in structure for sp in settings.specs(kind)}
    for name, sp in specs.items():
        if name in inherited:
            continue
        if name[0] == "c" and name[1:].isdigit():
            out[name] = sp.upper
        else:
            out[name] = min(max(0.0, sp.lower), sp.upper)
        before = f"J{int(name[1:]) - 1}" if name[0] == "J" and name[1:].isdigit() else ""
        if before in specs and before in out:
            low, high = specs[before].lower, specs[before].upper
            out[before] = min(max(out[before] - out[name], low), high)
    return out


def nests(rich: tuple[str, ...], simple: tuple[str, ...]) -> bool:
    """Whether structure ``rich`` contains ``simple`` (and is not it): as many inertias or
    more and every other submodel of ``simple`` (a ladder contains one with fewer inertias at
    its stiffest springs, :func:`switched_off`)."""
    kr, ks = canonical(rich), canonical(simple)
    masses = sum(k.n_masses for k in kr) >= sum(k.n_masses for k in ks)
    others = {k for k in ks if k not in MULTI_MASS} <= {k for k in kr if k not in MULTI_MASS}
    return masses and others and set(kr) != set(ks)


def neighbours(ind: Individual, settings: GPSettings) -> list[Individual]:
    """The structures one step from ``ind`` (``simplifications`` and ``extensions``), each
    once, in a deterministic order (the search's ``polish_rounds``)."""
    unique = {n.structure: n for n in [*simplifications(ind, settings), *extensions(ind, settings)]}
    return [unique[k] for k in sorted(unique) if k != ind.structure]


def chromosome_mutation(ind: Individual, settings: GPSettings, rng) -> Individual:
    """Replace a random node and its branch by a new random branch; the new tree is at least
    as large as the tree without the branch plus one node."""
    i = int(rng.integers(len(ind.nodes)))
    at_parent = ind.nodes[i].parent
    kept, mapping = remove(ind, subtree(ind, i))
    low = len(kept) + 1
    size = int(rng.integers(low, max(low, settings.max_nodes) + 1)) - len(kept)
    nodes = grow(kept, mapping.get(at_parent, -1), size, settings, rng)
    return repair(nodes, settings, rng)


def mutate(ind: Individual, settings: GPSettings, rng: np.random.Generator) -> Individual:
    """Apply each mutation independently with its probability (fixed order)."""
    for prob, op in (
        (settings.p_point, point_mutation),
        (settings.p_insertion, insertion_mutation),
        (settings.p_deletion, deletion_mutation),
        (settings.p_chromosome, chromosome_mutation),
    ):
        if rng.random() < prob:
            ind = op(ind, settings, rng)
    return ind


def mutate_once(ind: Individual, settings: GPSettings, rng: np.random.Generator) -> Individual:
    """Apply exactly one mutation, drawn with weights ``p_point : p_insertion : p_deletion :
    p_chromosome`` (uniform if all are 0); used to make a duplicate structure new."""
    ops = (point_mutation, insertion_mutation, deletion_mutation, chromosome_mutation)
    w = np.array([settings.p_point, settings.p_insertion, settings.p_deletion,
                  settings.p_chromosome])  # fmt: skip
    w = np.full(4, 1.0) if w.sum() <= 0 else w
    return ops[int(rng.choice(4, p=w / w.sum()))](ind, settings, rng)


def roulette(fitness: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    """Roulette-wheel selection: indices drawn with probability proportional to fitness
    (uniform if no fitness is positive and finite)."""
    w = np.where(np.isfinite(fitness) & (fitness > 0), fitness, 0.0)
    w = np.full(len(w), 1.0) if w.sum() <= 0 else w
    return rng.choice(len(w), size=size, p=w / w.sum())


def rank_weights(fitness: np.ndarray, pressure: float = 2.0) -> np.ndarray:
    """Linear-rank weights ``2 - s + 2 (s - 1) (r - 1) / (P - 1)`` (``r`` = rank, 1 = worst;
    ties and non-finite fitness ranked by a stable sort, non-finite/non-positive last)."""
    f = np.where(np.isfinite(fitness) & (fitness > 0), fitness, -np.inf)
    n = len(f)
    if n == 1:
        return np.ones(1)
    ranks = np.empty(n)
    ranks[np.argsort(f, kind="stable")] = np.arange(1, n + 1)
    return 2.0 - pressure + 2.0 * (pressure - 1.0) * (ranks - 1.0) / (n - 1.0)


def select(fitness: np.ndarray, rng: np.random.Generator, size: int, settings: GPSettings):
    """Parent indices by ``settings.selection``: ``"roulette"`` (paper, raw fitness),
    ``"rank"`` (linear-rank roulette) or ``"tournament"``."""
    if settings.selection == "roulette":
        return roulette(fitness, rng, size)
    if settings.selection == "rank":
        w = rank_weights(fitness, settings.selection_pressure)
        w = np.full(len(w), 1.0) if w.sum() <= 0 else w
        return rng.choice(len(w), size=size, p=w / w.sum())
    f = np.where(np.isfinite(fitness), fitness, -np.inf)
    draws = rng.integers(len(f), size=(size, settings.tournament_size))
    return np.array([row[int(np.argmax(f[row]))] for row in draws], dtype=int)

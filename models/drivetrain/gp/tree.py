"""GP individuals: trees of submodel nodes (a chromosome; node order has no meaning).

Nodes are stored topologically (a parent precedes its children); ``parent = -1`` is the root.
Every node carries its parameter values (the inherited start of the next identification).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from models.drivetrain.submodels import MULTI_MASS, Submodel, can_add, canonical, rule_violations


@dataclass(frozen=True)
class Node:
    kind: str
    parent: int
    params: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Individual:
    """A tree of nodes. ``structure`` is the canonical tuple of submodel names."""

    nodes: tuple[Node, ...]

    @property
    def kinds(self) -> list[Submodel]:
        return [Submodel(n.kind) for n in self.nodes]

    @property
    def structure(self) -> tuple[str, ...]:
        return tuple(k.value for k in canonical(self.kinds))

    @property
    def codes(self) -> tuple[int, ...]:
        return tuple(k.code for k in canonical(self.kinds))

    @property
    def parameters(self) -> dict[str, float]:
        return {name: value for node in self.nodes for name, value in node.params}

    def is_valid(self) -> bool:
        return not rule_violations(self.kinds) and self.is_tree()

    def is_tree(self) -> bool:
        return all(
            (i == 0 and n.parent == -1) or (i > 0 and 0 <= n.parent < i)
            for i, n in enumerate(self.nodes)
        )

    def with_parameters(self, values: dict[str, float]) -> Individual:
        """Copy with node parameters replaced by ``values`` (identified -> inherited)."""
        nodes = tuple(
            replace(n, params=tuple((k, float(values.get(k, v))) for k, v in n.params))
            for n in self.nodes
        )
        return Individual(nodes)

    def to_dict(self) -> dict:
        return {"nodes": [{"kind": n.kind, "parent": n.parent, "params": dict(n.params)}
                          for n in self.nodes]}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> Individual:
        return cls(tuple(Node(d["kind"], int(d["parent"]), tuple((k, float(v))
                   for k, v in d["params"].items())) for d in data["nodes"]))  # fmt: skip

    def __str__(self) -> str:
        return f"{list(self.codes)} {list(self.structure)}"


def subtree(ind: Individual, i: int) -> list[int]:
    """Indices of node ``i`` and all its descendants (ascending)."""
    inside = {i}
    for j in range(i + 1, len(ind.nodes)):
        if ind.nodes[j].parent in inside:
            inside.add(j)
    return sorted(inside)


def remove(ind: Individual, drop: list[int]) -> tuple[list[Node], dict[int, int]]:
    """Nodes without ``drop``; children of a dropped node move to its nearest kept ancestor
    (or to the first kept node). Returns the node list and the old->new index map."""
    dropped = set(drop)
    mapping: dict[int, int] = {}
    out: list[Node] = []
    for j, node in enumerate(ind.nodes):
        if j in dropped:
            continue
        parent = node.parent
        while parent in dropped:
            parent = ind.nodes[parent].parent
        new_parent = mapping.get(parent, -1 if not out else 0)
        mapping[j] = len(out)
        out.append(replace(node, parent=new_parent if out else -1))
    return out, mapping


def graft(nodes: list[Node], at: int, branch: list[Node]) -> list[Node]:
    """Append ``branch`` (parents relative to the branch, root ``-1``) under ``nodes[at]``
    (``at = -1``: at the root). A node that would break a construction rule is dropped; its
    children attach to its nearest kept ancestor."""
    nodes = list(nodes)
    mapping: dict[int, int] = {}
    for j, node in enumerate(branch):
        parent = mapping.get(node.parent, at) if node.parent >= 0 else at
        if not can_add([Submodel(n.kind) for n in nodes], Submodel(node.kind)):
            mapping[j] = parent
            continue
        if not nodes:
            parent = -1
        elif parent < 0:
            parent = 0
        mapping[j] = len(nodes)
        nodes.append(replace(node, parent=parent))
    return nodes


def has_multi_mass(nodes: list[Node]) -> bool:
    return any(Submodel(n.kind) in MULTI_MASS for n in nodes)


def pick(rng: np.random.Generator, items: list):
    return items[int(rng.integers(len(items)))]

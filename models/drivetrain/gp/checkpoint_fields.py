"""Fields of a search checkpoint read back (``StructureSearch._restore``; split from
``gp.search`` to keep it within 400 lines)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from methods.errors import InputError
from models.drivetrain.gp.evaluate import Evaluation
from models.drivetrain.gp.tree import Individual


class Damaged(Exception):
    """A checkpoint ``field`` that does not parse, and why (``cause``)."""

    def __init__(self, field: str, cause: Exception) -> None:
        super().__init__(field, cause)
        self.field, self.cause = field, cause


@dataclass(frozen=True)
class Restored:
    """What a search resumes from (``parse``)."""

    rng: np.random.Generator
    population: list[Individual]
    ahead: list[Individual]
    evaluated: dict[str, Evaluation]
    above: dict[str, float | None]
    best: Evaluation | None
    generation: int


def parse(state: dict, restore_gain: Callable[[Any], None]) -> Restored:
    """A checkpoint's fields, in the order they are checked, ``restore_gain(state
    ["friction_gain"])`` among them; :class:`Damaged` names the first that does not parse."""
    field = "rng"
    try:
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        field = "population"
        population = [Individual.from_dict(d) for d in state["population"]]
        _ = [ind.structure for ind in population]  # every node a known submodel
        field = "ahead"
        ahead = [Individual.from_dict(d) for d in state.get("ahead", [])]
        _ = [ind.structure for ind in ahead]
        field = "evaluated"
        evaluated = {k: evaluation(v) for k, v in state.get("evaluated", {}).items()}
        field = "refine_above"
        above = {str(k): threshold(v) for k, v in state.get("refine_above", {}).items()}
        field = "friction_gain"
        restore_gain(state.get("friction_gain"))
        field = "best"
        best = evaluation(state["best"]) if state["best"] else None
        field = "generation"
        generation = int(state["generation"])
        field = "history"
        if not isinstance(state["history"], list):
            raise TypeError("not a list")
        field = "population_rows"
        for r in state["population_rows"]:  # what a resume reads of them
            _ = (int(r["generation"]), str(r["names"]), float(r["fitness"]))
    except (KeyError, TypeError, ValueError, AttributeError, InputError) as exc:
        raise Damaged(field, exc) from None
    return Restored(rng, population, ahead, evaluated, above, best, generation)


def threshold(value: Any) -> float | None:
    """A refinement threshold read from a checkpoint: None or a number (not NaN)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError(f"not a fitness threshold: {value!r}")
    return float(value)


def evaluation(d: dict) -> Evaluation:
    """An ``Evaluation`` from its ``to_dict``."""
    return Evaluation(**{**d, "structure": tuple(d["structure"]), "codes": tuple(d["codes"])})

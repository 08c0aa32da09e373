"""Fields of a search checkpoint read back (``StructureSearch._restore``; split from
``gp.search`` to keep it within 400 lines)."""

from __future__ import annotations

from typing import Any

from models.drivetrain.gp.evaluate import Evaluation


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

"""Degenerate genetic programming for drive-train structures (docs/methods.md §2)."""

from models.drivetrain.gp.evaluate import (
    Evaluation,
    IndividualSpec,
    RecordingArrays,
    evaluate_batch,
    identify,
)
from models.drivetrain.gp.recording import RecordingFile, as_arrays
from models.drivetrain.gp.search import StructureSearch, serial_map
from models.drivetrain.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.gp.tree import Individual, Node

__all__ = [
    "Evaluation",
    "GPSettings",
    "IdentificationSettings",
    "Individual",
    "IndividualSpec",
    "Node",
    "RecordingArrays",
    "RecordingFile",
    "StructureSearch",
    "as_arrays",
    "evaluate_batch",
    "identify",
    "serial_map",
]

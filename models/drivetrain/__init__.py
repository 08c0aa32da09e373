"""Drive-train construction kit (Tantau et al. 2019): submodels, assembly into
``x' = A x + B u + f(x, u)``, ``y = C x + D u + g(x, u)``, compiled simulation and the
reference excitation."""

from models.drivetrain.excitation import REFERENCE_STRUCTURE, reference_recording
from models.drivetrain.kit import DriveTrainKit, StateSpace, assemble
from models.drivetrain.simulate import CompiledSimulator, get_simulator, simulate
from models.drivetrain.submodels import (
    PARAMETERS,
    ParameterSpec,
    Submodel,
    is_valid,
    parse_structure,
    rule_violations,
)

__all__ = [
    "PARAMETERS",
    "REFERENCE_STRUCTURE",
    "CompiledSimulator",
    "DriveTrainKit",
    "ParameterSpec",
    "StateSpace",
    "Submodel",
    "assemble",
    "get_simulator",
    "is_valid",
    "parse_structure",
    "reference_recording",
    "rule_violations",
    "simulate",
]

"""Registry of underactuated systems: ``get_system(name, overrides)``, ``list_systems()``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from methods.dae import Demand
from methods.errors import InputError
from models.registry import short_repr
from models.underactuated.aircraft import AIRCRAFT
from models.underactuated.base import System, SystemSpec
from models.underactuated.cranes import PLANAR_CRANE, ROTARY_CRANE, TROLLEY_CRANE
from models.underactuated.elastic import ELASTIC_JOINT_1, ELASTIC_JOINT_2
from models.underactuated.linear import CHAIN, TWO_MASS
from models.underactuated.plugins import normalize_reference, resolve_system, source_reference
from models.underactuated.ship import SHIP
from models.underactuated.user import user_spec

__all__ = ["SYSTEMS", "exact_solution", "get_system", "list_systems", "user_system_spec"]

SYSTEMS: dict[str, SystemSpec] = {
    s.name: s
    for s in (
        TWO_MASS,
        CHAIN,
        ELASTIC_JOINT_1,
        ELASTIC_JOINT_2,
        PLANAR_CRANE,
        TROLLEY_CRANE,
        ROTARY_CRANE,
        SHIP,
        AIRCRAFT,
    )
}


def list_systems() -> list[SystemSpec]:
    """All registered systems (name, description, parameters with units and defaults)."""
    return list(SYSTEMS.values())


def get_system(name: str, overrides: Mapping[str, float] | None = None) -> System:
    """Build system ``name`` with parameter ``overrides`` (names as in ``list_systems()``).

    ``name`` may also be a lab's own system (docs/models.md): an entry point of group
    ``greylab.systems`` or ``module:attr`` (``file.py:attr``), imported here (the trusted
    Python API; flows check the worker's allow-list first, `plugins.check_system_reference`).
    """
    if name in SYSTEMS:
        return SYSTEMS[name](overrides)
    return user_system_spec(name)(overrides)


def user_system_spec(name: str) -> SystemSpec:
    """The registry entry of a lab's own system (imported, its attributes checked)."""
    reference = normalize_reference(name) if isinstance(name, str) else name
    if not isinstance(reference, str) or source_reference(reference) is None:
        raise InputError(
            f"unknown system {short_repr(name)}; known: {sorted(SYSTEMS)}, or your own as "
            "module:Class (docs/models.md)"
        )
    return user_spec(resolve_system(reference), reference)


def exact_solution(system: System, demand: Demand | Mapping | None, t: np.ndarray) -> pd.DataFrame:
    """Exact (flat) solution where one is implemented (two_mass, chain, elastic_joint_1,
    planar_crane)."""
    if system.exact is None:
        raise InputError(f"system {system.name!r} has no exact solution implemented")
    dem = demand if isinstance(demand, Demand) else system.demand(demand)
    return system.exact(dem, np.asarray(t, float))

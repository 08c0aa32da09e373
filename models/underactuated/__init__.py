"""Underactuated systems in partly specified motion (docs/methods.md §3, seed 002).

``get_system(name, overrides) -> System`` (problem, default demand, parameter table),
``list_systems()``, ``exact_solution(system, demand, t)`` for two_mass, chain, planar_crane.
"""

from models.underactuated.base import Parameter, System, SystemSpec
from models.underactuated.registry import SYSTEMS, exact_solution, get_system, list_systems

__all__ = [
    "SYSTEMS",
    "Parameter",
    "System",
    "SystemSpec",
    "exact_solution",
    "get_system",
    "list_systems",
]

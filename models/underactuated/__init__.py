"""Underactuated systems in partly specified motion (docs/methods.md §3, seed 002).

``get_system(name, overrides) -> System`` (problem, default demand, parameter table),
``list_systems()``, ``exact_solution(system, demand, t)`` for two_mass, chain, planar_crane.
A lab's own system (docs/models.md): ``get_system("module:Class")``, protocol in ``user.py``,
allow-list in ``plugins.py``.
"""

from models.underactuated.base import Parameter, System, SystemSpec
from models.underactuated.registry import (
    SYSTEMS,
    exact_solution,
    get_system,
    list_systems,
    user_system_spec,
)

__all__ = [
    "SYSTEMS",
    "Parameter",
    "System",
    "SystemSpec",
    "exact_solution",
    "get_system",
    "list_systems",
    "user_system_spec",
]

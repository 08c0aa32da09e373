"""Which lab systems may run, and finding them (docs/trust.md, docs/models.md).

The same three parties as for press models (models/registry.py):

- The Python API and the CLI user are trusted: ``get_system("mylab.hoist:Hoist")`` imports it,
  and ``greylab inverse run|list`` adds the references typed on its command line to the
  process's allow-list (`allow_systems`, variable ``GREYLAB_ALLOWED_SYSTEMS`` inherited by its
  workers).
- A flow run started from the dashboard (a deployment) gets only the systems the *worker*
  allows: built-in names, entry points in group ``greylab.systems`` of its environment (by
  name or by their ``module:attr`` value) and the comma-separated ``module:attr`` references of
  ``GREYLAB_ALLOWED_SYSTEMS``. `check_system_reference` is the gate of the flow settings and of
  `models.underactuated.study.check_study`: it never imports anything.

`resolve_system` checks the type of what it imported before calling anything: an instance
with the protocol's functions is used, a class with them is instantiated with no arguments,
anything else (a function, a module, a number) is refused with an `InputError`, never called.
A reference may name a file of the current folder as ``file.py:attr`` (= ``file:attr``).
"""

from __future__ import annotations

import re
from typing import Any

from methods.errors import InputError
from models.registry import (
    add_allowed,
    allowed_references,
    construct,
    entry_points_of,
    import_reference,
    is_reference,
    short_repr,
)
from models.underactuated.user import FUNCTIONS, REQUIRED, is_user_system

__all__ = [
    "ALLOWED_ENV",
    "ENTRY_POINT_GROUP",
    "allow_systems",
    "allowed_systems",
    "check_system_reference",
    "entry_point_systems",
    "normalize_reference",
    "resolve_system",
    "source_reference",
]

ENTRY_POINT_GROUP = "greylab.systems"
ALLOWED_ENV = "GREYLAB_ALLOWED_SYSTEMS"
_FILE_REFERENCE = re.compile(r"^([A-Za-z_]\w*)\.py:([A-Za-z_]\w*)$")
_SESSION_ALLOWED: set[str] = set()  # references the trusted CLI user named in this process


def normalize_reference(name: str) -> str:
    """``hoist.py:Hoist`` (a file of the current folder) -> ``hoist:Hoist``; else unchanged."""
    if isinstance(name, str):
        match = _FILE_REFERENCE.match(name)
        if match:
            return f"{match.group(1)}:{match.group(2)}"
    return name


def entry_point_systems() -> dict[str, str]:
    """``{entry-point name: "module:attr"}`` of the group ``greylab.systems``."""
    return entry_points_of(ENTRY_POINT_GROUP)


def allowed_systems() -> set[str]:
    """Every plugin system name or reference a flow run may use here (besides the built-ins)."""
    return allowed_references(entry_point_systems(), ALLOWED_ENV, _SESSION_ALLOWED)


def allow_systems(references: list[str]) -> None:
    """Allow system references for this process and the processes it starts (the CLI calls
    this with the references its trusted user typed)."""
    new = [normalize_reference(r) for r in references]
    add_allowed([r for r in new if is_reference(r)], ALLOWED_ENV, _SESSION_ALLOWED)


def check_system_reference(name: Any, builtin: set[str] | frozenset[str] = frozenset()) -> str:
    """Validate a system named by a flow parameter WITHOUT importing anything; returns the
    (normalised) name. A name without ``:`` is a built-in or an entry point (an unknown one
    is reported when the study is checked); a ``module:attr`` must be allowed on this worker."""
    if not isinstance(name, str):
        raise InputError(f"system {short_repr(name)}: expected a system name (string)")
    name = normalize_reference(name)
    if len(name) > 200:
        raise InputError(f"system {short_repr(name)}: a system name has at most 200 characters")
    if ":" not in name or name in builtin:
        return name
    if name in allowed_systems():
        return name
    if not is_reference(name):
        raise InputError(
            f"system {short_repr(name)}: expected a built-in name or 'package.module:attribute' "
            "(identifiers separated by dots, one colon)"
        )
    raise InputError(
        f"system {short_repr(name)} is not allowed for flow runs: a lab's system must be installed "
        f"as an entry point in group {ENTRY_POINT_GROUP!r} or listed in {ALLOWED_ENV} on the "
        "worker (the CLI allows the systems named on its own command line)"
    )


def source_reference(name: str) -> str | None:
    """The ``module:attr`` behind a plugin system name (entry point or reference), else None."""
    name = normalize_reference(name)
    if ":" in name:
        return name
    return entry_point_systems().get(name)


def resolve_system(name: str) -> Any:
    """The object behind an entry-point name or ``module:attr`` (or ``file.py:attr``).

    A class is instantiated with no arguments only if it has the protocol's functions; an
    instance must have them; anything else is refused, never called."""
    reference = source_reference(name)
    if reference is None:
        raise InputError(f"unknown system {short_repr(name)}")
    try:
        obj = import_reference(reference)
    except InputError as exc:  # the registry's wording says "model"
        raise InputError(str(exc).replace("for model", "for system")) from None
    if isinstance(obj, type):
        if not is_user_system(obj):
            missing = [f for f in FUNCTIONS if not callable(getattr(obj, f, None))]
            raise InputError(
                f"system {short_repr(name)}: class {obj.__name__} has no {', '.join(missing)} "
                "method, so it is not an underactuated system (not instantiated); a system "
                f"needs {list(REQUIRED)} (docs/models.md)"
            )
        obj = construct(obj, name, "system")
    elif not is_user_system(obj):
        raise InputError(
            f"system {short_repr(name)} is a {type(obj).__name__}, not a system: point at an object "
            "or class with kinetic_energy, potential_energy, input_forces and output "
            "(functions are not called; docs/models.md)"
        )
    return obj

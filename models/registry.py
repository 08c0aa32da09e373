"""Built-in model names and resolution of user models (``package.module:attribute``).

Who may name code (docs/trust.md):

- The Python API and the CLI user are trusted (they run their own code locally):
  `resolve_model("mypkg.spring:Spring")` imports it, and the CLI adds the references given on
  its command line to the process's allow-list (`allow_models`) before building the flow's
  settings.
- A flow run started from the dashboard (a deployment) only gets models the worker allows:
  built-in names, entry points in group ``greylab.models`` of the worker's environment
  (by entry-point name or by their ``module:attr`` value), and the comma-separated
  ``module:attr`` references of ``GREYLAB_ALLOWED_MODELS``. `check_model_reference` is the
  gate the flow settings (`PressStudy.models`) validate with: it never imports anything.

`resolve_model` checks the type of the object it found before calling anything: an instance of
`methods.protocol.ResponseModel` is used as is, a class is instantiated with no arguments (and
the instance checked again); any other object - a function such as `os.abort`, a module, a
number - is refused with an `InputError`, never called.
"""

from __future__ import annotations

import importlib
import os
import re
from importlib import metadata
from typing import Any

from methods.errors import InputError, first_line
from methods.protocol import ResponseModel
from methods.timeouts import PluginTimeout, call_with_time_limit
from models.press import M1, M2, M3

BUILTIN: dict[str, Any] = {"M1": M1, "M2": M2, "M3": M3}
ENTRY_POINT_GROUP = "greylab.models"
ALLOWED_ENV = "GREYLAB_ALLOWED_MODELS"
_REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
_SESSION_ALLOWED: set[str] = set()  # references the trusted CLI user named in this process


def short_repr(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "...'"


def _timed(fn: Any, *args: Any, what: str) -> Any:
    """One call into a plugin, bounded by `GREYLAB_PLUGIN_TIMEOUT_S` (`methods.timeouts`):
    `PluginTimeout` (exit 2) naming the call when it runs longer."""
    return call_with_time_limit(fn, *args, what=f"model plugin: {short_repr(what, 300)}")


def is_reference(value: str) -> bool:
    """True for a syntactically valid ``package.module:attribute`` (at most 200 chars)."""
    return len(value) <= 200 and bool(_REFERENCE.match(value))


def entry_points_of(group: str) -> dict[str, str]:
    """``{entry-point name: "module:attr"}`` of an entry-point group."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=group)}


def allowed_references(eps: dict[str, str], env_var: str, session: set[str]) -> set[str]:
    """What a worker allows: entry points by name and value, the comma-separated references
    of ``env_var`` and those the trusted CLI user named in this process (``session``)."""
    env = {v.strip() for v in os.environ.get(env_var, "").split(",") if v.strip()}
    return set(eps) | set(eps.values()) | env | session


def add_allowed(new: list[str], env_var: str, session: set[str]) -> None:
    """Allow references for this process (``session``) and the processes it starts
    (``env_var``, inherited by Dask workers and flow runs)."""
    if not new:
        return
    session.update(new)
    current = [v for v in os.environ.get(env_var, "").split(",") if v.strip()]
    os.environ[env_var] = ",".join(dict.fromkeys([*current, *new]))


def entry_point_models() -> dict[str, str]:
    """``{entry-point name: "module:attr"}`` of the group ``greylab.models``."""
    return entry_points_of(ENTRY_POINT_GROUP)


def allowed_models() -> set[str]:
    """Every plugin name or reference a flow run may use here (besides the built-ins)."""
    return allowed_references(entry_point_models(), ALLOWED_ENV, _SESSION_ALLOWED)


def allow_models(references: list[str]) -> None:
    """Allow plugin references for this process and the processes it starts (the CLI calls
    this with the references its trusted user typed; Dask workers inherit the variable)."""
    new = [r for r in references if r not in BUILTIN and is_reference(r)]
    add_allowed(new, ALLOWED_ENV, _SESSION_ALLOWED)


def check_model_reference(name: str) -> str:
    """Validate a model named by a flow parameter WITHOUT importing anything.

    Returns the name; raises `InputError` unless it is built-in or allowed on this worker.
    """
    if not isinstance(name, str):
        raise InputError(f"model {short_repr(name)}: expected a model name (string)")
    if name in BUILTIN:
        return name
    allowed = allowed_models()
    if name in allowed:
        return name
    if ":" not in name:
        raise InputError(
            f"unknown model {short_repr(name)}: choose one of {sorted(BUILTIN)}"
            + (f" or an allowed plugin {sorted(allowed)}" if allowed else "")
        )
    raise InputError(
        f"model {short_repr(name)} is not allowed for flow runs: a plugin model must be installed "
        f"as an entry point in group {ENTRY_POINT_GROUP!r} or listed in {ALLOWED_ENV} on the "
        "worker (the CLI allows the models named on its own command line)"
    )


def import_reference(reference: str) -> Any:
    eps = entry_point_models()
    if reference in eps:
        reference = eps[reference]
    if not is_reference(reference):
        raise InputError(
            f"model {short_repr(reference)}: expected 'package.module:attribute' (identifiers "
            "separated by dots, one colon)"
        )
    module_name, _, attr = reference.partition(":")
    try:
        module = _timed(importlib.import_module, module_name, what=f"importing {reference}")
    except PluginTimeout:
        raise
    except ImportError as exc:
        raise InputError(
            f"cannot import module {short_repr(module_name)} for model: {short_repr(str(exc), 200)} "
            "(is its folder on PYTHONPATH or the package installed?)"
        ) from exc
    except Exception as exc:  # the plugin's own code failed (SyntaxError, a raise at import)
        raise InputError(
            f"model plugin {short_repr(reference)}: importing module {short_repr(module_name)} failed: "
            f"{first_line(exc)}"
        ) from None
    if not hasattr(module, attr):
        raise InputError(f"module {short_repr(module_name)} has no attribute {short_repr(attr)}")
    return getattr(module, attr)


def construct(cls: type, reference: str, kind: str, *, timed: bool = False) -> Any:
    """``cls()`` of a plugin class (``kind`` "model" or "system"), a failure as an `InputError`
    naming the plugin: a constructor that needs arguments, or one that raised. ``timed``:
    bounded by `GREYLAB_PLUGIN_TIMEOUT_S` (a `PluginTimeout` passes through)."""
    try:
        if timed:
            return _timed(cls, what=f"the constructor {cls.__name__}() of {reference}")
        return cls()
    except PluginTimeout:
        raise
    except TypeError as exc:
        detail = str(exc) if kind == "model" else first_line(exc)
        raise InputError(
            f"{kind} {short_repr(reference)}: the class needs a constructor without "
            f"arguments ({detail}); or point at an instance"
        ) from None
    except Exception as exc:  # the plugin's constructor failed
        raise InputError(
            f"{kind} plugin {short_repr(reference)}: its constructor {cls.__name__}() "
            f"failed: {first_line(exc)}"
        ) from None


def resolve_model(name_or_path: str | ResponseModel) -> Any:
    """A built-in name ("M1", "M2", "M3"), an entry-point name of group ``greylab.models`` or
    ``package.module:attribute`` -> model object.

    The attribute may be a model instance or a class whose no-argument constructor gives one.
    Raises ``InputError`` naming the choices when the name is unknown, and refuses, without
    calling it, anything else (functions, modules, other objects).
    """
    if not isinstance(name_or_path, str):
        obj = name_or_path
    elif name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    elif ":" in name_or_path or name_or_path in entry_point_models():
        obj = import_reference(name_or_path)
        if isinstance(obj, type):
            if not callable(getattr(obj, "response", None)):
                raise InputError(
                    f"model {short_repr(name_or_path)}: class {obj.__name__} has no response(p, "
                    "forces) method, so it is not a ResponseModel (not instantiated)"
                )
            obj = construct(obj, name_or_path, "model", timed=True)
        elif not isinstance(obj, ResponseModel):
            raise InputError(
                f"model {short_repr(name_or_path)} is a {type(obj).__name__}, not a model: point at "
                "a ResponseModel instance or a class with a no-argument constructor (functions "
                "are not called)"
            )
    else:
        raise InputError(
            f"unknown model {short_repr(name_or_path)}: choose one of {sorted(BUILTIN)} or give"
            " 'package.module:attribute' of your own ResponseModel"
        )
    if not isinstance(obj, ResponseModel):
        raise InputError(
            f"{short_repr(name_or_path)} is not a ResponseModel (needs name, parameters, sensors and"
            " response(p, forces))"
        )
    return obj

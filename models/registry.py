"""Built-in model names and resolution of user models (``package.module:attribute``)."""

from __future__ import annotations

import importlib
from typing import Any

from methods.errors import InputError
from methods.protocol import ResponseModel
from models.press import M1, M2, M3

BUILTIN: dict[str, Any] = {"M1": M1, "M2": M2, "M3": M3}


def resolve_model(name_or_path: str | ResponseModel) -> Any:
    """A built-in name ("M1", "M2", "M3") or ``package.module:attribute`` -> model object.

    The attribute may be a model instance or a zero-argument factory (class or function).
    Raises ``InputError`` naming the choices when the name is unknown or the object does not
    follow ``methods.protocol.ResponseModel``.
    """
    if not isinstance(name_or_path, str):
        obj = name_or_path
    elif name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    elif ":" in name_or_path:
        module_name, _, attr = name_or_path.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InputError(f"cannot import module {module_name!r} for model: {exc}") from exc
        if not attr or not hasattr(module, attr):
            raise InputError(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(module, attr)
        if callable(obj) and not isinstance(obj, ResponseModel):
            obj = obj()
    else:
        raise InputError(
            f"unknown model {name_or_path!r}: choose one of {sorted(BUILTIN)} or give"
            " 'package.module:attribute' of your own ResponseModel"
        )
    if not isinstance(obj, ResponseModel):
        raise InputError(
            f"{name_or_path!r} is not a ResponseModel (needs name, parameters, sensors and"
            " response(p, forces))"
        )
    return obj

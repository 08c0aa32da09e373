"""Lazy re-exports for package `__init__` modules: `from methods import fit_parameters` works,
but importing `methods` (or a light submodule such as `methods.errors`) does not import every
submodule and scipy with it. A loaded model product (`products/pyfunc.py`) needs only a few
modules; the rest would cost most of its load time."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` resolving each name of `exports` (name -> submodule, relative
    to `package`) on first use and caching it in the package namespace."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        namespace[name] = value
        return value

    return __getattr__

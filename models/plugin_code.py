"""A plugin's code: what a result computed with it depends on, and running its latest version.

A built-in press model (`M1`, `M2`, `M3`) is code under `models/` (covered by the cache's
source hash). A plugin `package.module:attribute` (a press model or an underactuated system)
is fingerprinted by its module's source file, or by every `*.py` of its top-level package when
the module lives in a package. A long-lived process (a notebook, `greylab serve`) re-imports a
plugin module whose source changed (`fresh_model_module`), so what runs is the code whose hash
is recorded. Used by the result cache (`tasks/cache.py`) and the inverse study.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path

BUILTIN_MODELS = frozenset({"M1", "M2", "M3"})


def hash_files(paths: Iterable[Path], root: Path) -> str:
    """SHA-256 over the names (relative to `root`) and bytes of `paths`, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def model_fingerprint(reference: str) -> str | None:
    """What a model reference's results depend on, beyond the greylab numerics.

    Built-in names stand for code under `models/` (in `code_fingerprint`). A plugin
    `package.module:attribute` is fingerprinted by its module's source file, or by every
    `*.py` of its top-level package when the module lives in a package. None: the module
    cannot be located (the task will say so).
    """
    if reference in BUILTIN_MODELS or ":" not in reference:
        return f"builtin:{reference}"
    module_name = reference.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        return None
    origin = Path(spec.origin).resolve()
    top = module_name.split(".")[0]
    files = [origin]
    if "." in module_name or spec.submodule_search_locations:
        top_spec = importlib.util.find_spec(top)
        locations = list(top_spec.submodule_search_locations or []) if top_spec else []
        files = [p.resolve() for loc in locations for p in Path(loc).rglob("*.py")] or files
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    return f"{reference}@{hash_files(set(files), root)}"


_LOADED: dict[str, str] = {}  # plugin module name -> fingerprint of the code last resolved


def fresh_model_module(reference: str) -> None:
    """Re-import a plugin model's module when its source changed since this process last
    resolved it (Python would otherwise keep running the old code)."""
    if reference in BUILTIN_MODELS or ":" not in reference:
        return
    module_name = reference.partition(":")[0]
    current = (model_fingerprint(reference) or "").partition("@")[2]  # the code, not the name
    previous = _LOADED.get(module_name)
    _LOADED[module_name] = current
    module = sys.modules.get(module_name)
    if module is not None and previous is not None and current != previous:
        origin = getattr(module, "__file__", None)
        if origin:  # bytecode of an edit within the same second and size would be reused
            with contextlib.suppress(OSError, ValueError, NotImplementedError):
                os.remove(importlib.util.cache_from_source(origin))
        importlib.invalidate_caches()
        importlib.reload(module)

"""Cross-run result cache of the study tasks: keyed on everything a result depends on.

A cached result must never outlive the code or data that made it. The key of a cached task
(`StudyCache.compute_key`) is a SHA-256 over

| part | what it covers |
|---|---|
| task source | the task function's own code (Prefect's `TASK_SOURCE`) |
| `code_fingerprint()` | the greylab version and every `*.py` under `methods/`, `models/`, `schemas/`, and the task's module |
| table inputs | the *content* (SHA-256 of the bytes) of every file named by a path input, not its name |
| model inputs | built-in names by name (their code is in `models/`); a plugin `package.module:attribute` by the source of its module (all `*.py` of its top-level package when it is one) |
| other inputs | their values (settings, sensors, sigma, split plans) |

A table path that does not exist, or a plugin whose module cannot be found, yields no key:
the task then runs uncached and reports its own clear error.

Where: `$GREYLAB_CACHE_DIR`, default `$GREYLAB_HOME/cache` (Prefect result files, one per
key). Expiry: `$GREYLAB_CACHE_DAYS` days (default 30) after a result was computed. `greylab
cache clear` empties it; `--no-cache` / `cache: false` recomputes (and refreshes the entry).

Deletes only what greylab made: greylab creates the folder with a marker file
(`.greylab-cache`, `ensure_cache_dir`); `clear_cache` removes only cache entries (regular files
named like a key: 32 hex digits) inside a folder that carries the marker, never the folder,
never anything else, and refuses (`InputError`, exit 2, nothing deleted) a folder without the
marker, e.g. `GREYLAB_CACHE_DIR=.` or `=$GREYLAB_HOME`. A folder of an earlier version (no
marker, but every entry a cache entry, or empty) is adopted: it gets the marker.

A plugin module edited while a long-lived process (a notebook, `greylab serve`) holds it is
re-imported before a task uses it (`fresh_model_module`), so a recomputed result is computed
with the code its key names.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from prefect.cache_policies import TASK_SOURCE, CachePolicy
from prefect.utilities.hashing import hash_objects

from models.plugin_code import hash_files, model_fingerprint
from runtime.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
NUMERICS = ("methods", "models", "schemas")


def source_tree_hash(root: Path, packages: Iterable[str] = NUMERICS) -> str:
    """SHA-256 over the relative names and bytes of every `*.py` under `root/<package>`."""
    files = [p for pkg in packages for p in (root / pkg).rglob("*.py") if p.is_file()]
    return hash_files(files, root)


def _version() -> str:
    try:
        return metadata.version("greylab")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


@functools.lru_cache(maxsize=4)
def code_fingerprint(root: Path = ROOT) -> str:
    """The greylab version plus a source hash of the numerical packages (once per process)."""
    return f"{_version()}+{source_tree_hash(root)[:20]}"


def file_digest(path: str | Path) -> str | None:
    """SHA-256 of a file's bytes, or None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


@dataclass
class StudyCache(CachePolicy):
    """Prefect cache policy of the study tasks (see the module docstring for the key).

    `tables`: names of inputs that are table paths (hashed by content); `models`: names of
    inputs that are model references (hashed by code).
    """

    tables: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    module_file: str | None = field(default=None)

    def compute_key(
        self,
        task_ctx: Any,
        inputs: dict[str, Any],
        flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        parts: dict[str, Any] = {
            "task": TASK_SOURCE.compute_key(task_ctx, inputs, flow_parameters, **kwargs),
            "code": code_fingerprint(),
            "module": file_digest(self.module_file) if self.module_file else None,
        }
        values: dict[str, Any] = {}
        for name, value in sorted((inputs or {}).items()):
            if name in self.tables:
                value = file_digest(value)
            elif name in self.models:
                value = model_fingerprint(value)
            if value is None and (name in self.tables or name in self.models):
                return None  # unreadable input: run uncached, the task reports the problem
            values[name] = value
        parts["inputs"] = values
        return hash_objects(parts, raise_on_failure=True)


def cache_dir() -> Path:
    return load_settings().cache_dir


def cache_expiration() -> timedelta:
    return timedelta(days=load_settings().cache_days)


def cached(task: Any, *, enabled: bool) -> Any:
    """`task` storing its results in the greylab cache; `enabled=False` recomputes and
    refreshes the entry (the next cached run sees the fresh result)."""
    return task.with_options(
        result_storage=ensure_cache_dir(),
        # pickle, whatever the flow's serializer (study flows persist their own result as
        # JSON; a cached step holds numpy arrays and result objects)
        result_serializer="pickle",
        cache_expiration=cache_expiration(),
        refresh_cache=not enabled,
    )


def was_cached(state: Any) -> bool:
    """A task run's final state came from the cache (Prefect names it "Cached")."""
    return getattr(state, "name", None) == "Cached"


@dataclass
class CacheUse:
    """Which steps of one run came from the cache, in the order they ran."""

    cached: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)

    def record(self, step: str, state: Any) -> None:
        (self.cached if was_cached(state) else self.computed).append(step)

    @property
    def status(self) -> str:
        """ "hit" (every step cached), "miss" (none) or "partial"."""
        if not self.cached:
            return "miss"
        return "hit" if not self.computed else "partial"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "cached": list(self.cached), "computed": self.computed}

    def tags(self) -> dict[str, str]:
        steps = ",".join(self.cached)
        return {
            "greylab.cache": self.status,
            "greylab.cached_steps": steps[:4900] if steps else "-",
        }


#: the marker of a cache folder greylab created (only such a folder is ever cleared)
MARKER = ".greylab-cache"
#: a cache entry: a Prefect result file named by its key (`StudyCache.compute_key`, MD5 hex)
CACHE_ENTRY = re.compile(r"[0-9a-f]{32}")


def _entries(directory: Path) -> tuple[list[Path], list[Path]]:
    """(cache entries, everything else but the marker) directly inside `directory`."""
    entries: list[Path] = []
    others: list[Path] = []
    for path in directory.iterdir():
        if path.name == MARKER:
            continue
        is_entry = CACHE_ENTRY.fullmatch(path.name) and path.is_file() and not path.is_symlink()
        (entries if is_entry else others).append(path)
    return entries, others


def _mark(directory: Path) -> None:
    """Write the marker atomically (a complete file or none)."""
    fd, tmp = tempfile.mkstemp(prefix=".greylab-cache-", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write("greylab result cache: `greylab cache clear` removes its entries\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / MARKER)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def ensure_cache_dir(directory: Path | None = None) -> Path:
    """The cache folder, created with its marker; an unmarked folder holding only cache
    entries (an earlier version's cache) or nothing is adopted. A folder with other files is
    used as it is, unmarked: `greylab cache clear` will refuse it."""
    from methods.errors import InputError

    directory = directory or cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / MARKER).is_file() and not _entries(directory)[1]:
            _mark(directory)
    except OSError as exc:
        raise InputError(
            f"GREYLAB_CACHE_DIR {str(directory)[:300]}: cannot create or mark the cache folder "
            f"({exc.strerror}); set it to a folder you can write"
        ) from None
    return directory


def clear_cache(directory: Path | None = None) -> dict[str, Any]:
    """Delete the cache entries of a greylab cache folder; returns the folder, the files and
    bytes removed and the other files kept. A folder without the marker that holds anything
    but cache entries is refused (`InputError`): nothing is deleted. Entries that a writer
    removes or adds meanwhile are skipped, not errors."""
    from methods.errors import InputError

    directory = directory or cache_dir()
    if not directory.is_dir():
        return {"cache_dir": str(directory), "files_removed": 0, "bytes_removed": 0,
                "files_kept": 0}  # fmt: skip
    entries, others = _entries(directory)
    if not (directory / MARKER).is_file():
        if others:
            shown = ", ".join(repr(p.name[:60]) for p in sorted(others)[:3])
            raise InputError(
                f"GREYLAB_CACHE_DIR {str(directory)[:300]} is not a greylab cache folder: it has "
                f"no {MARKER} marker and holds other files ({shown}{', ...' if len(others) > 3 else ''}"
                "); nothing was deleted. greylab clears only the cache folder it created "
                "(default $GREYLAB_HOME/cache)"
            )
        ensure_cache_dir(directory)  # an earlier version's cache: adopt it
    removed = size = 0
    for path in entries:
        with contextlib.suppress(FileNotFoundError):
            bytes_ = path.stat().st_size
            path.unlink()
            removed, size = removed + 1, size + bytes_
    return {"cache_dir": str(directory), "files_removed": removed, "bytes_removed": size,
            "files_kept": len(others)}  # fmt: skip


def cache_info(directory: Path | None = None) -> dict[str, Any]:
    directory = directory or cache_dir()
    files = [p for p in directory.rglob("*") if p.is_file()] if directory.is_dir() else []
    files = [p for p in files if p != directory / MARKER]
    return {
        "cache_dir": str(directory),
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "expiry_days": load_settings().cache_days,
        "code_fingerprint": code_fingerprint(),
        "marked": (directory / MARKER).is_file(),
    }

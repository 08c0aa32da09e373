"""Empty stores made once per machine and copied into a fresh home (issue 31).

A fresh `GREYLAB_HOME` had to create MLflow's SQLite store and Prefect's SQLite database by
running their schema migrations: 7.1 s and 9.1 s in one process on this machine (2026-12-06
02:23 UTC, load 2-3; 0.17 s and 0.10 s copied from the templates), most of a fresh home's
first command (`benchmarks/cli_overhead.py`: the fresh home with and without templates). A *template* is such a store, empty and fully migrated, kept in
`$XDG_CACHE_HOME/greylab/store-templates/` (else `~/.cache/...`; `GREYLAB_STORE_TEMPLATES`
names another folder, `0` turns templates off):

- made from the first store this user creates for a given set of versions (a consistent
  snapshot through SQLite's backup API, written to a temporary file and renamed into place:
  two processes making one at once both write a whole file);
- keyed on what decides the schema: the package's version (MLflow or Prefect), SQLAlchemy's,
  alembic's, the SQLite library's and `FORMAT` here; another version makes another template;
- copied into a home that has no store yet (absent, or 0 bytes), under the store's lock
  (`runtime.stores.store_lock`), to a temporary file renamed into place: a store is either
  absent or whole;
- trusted only in a folder owned by this user and writable by no one else, and only when the
  file starts as a SQLite database; otherwise the store is created as before.

What a fresh creation writes beside the schema is the same in a copy: Prefect's migrations
write only their version row; MLflow's also write its `Default` experiment, whose artifact
location (`./mlruns/0` resolved in the working folder) and creation time
`runtime.stores.tracking_client` sets again after the copy.

Only the standard library and the atomic writer of `schemas.storage` (itself standard library only
at import).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import stat
from importlib import metadata
from pathlib import Path

from runtime.sqlite_journal import header_problem
from schemas.storage import write_atomic

ENV = "GREYLAB_STORE_TEMPLATES"
#: bumped when what greylab does to a new store changes (then every template is made again)
FORMAT = "1"
#: the packages whose versions decide each kind of store's schema
PACKAGES = {"mlflow": ("mlflow", "sqlalchemy", "alembic"),
            "prefect": ("prefect", "sqlalchemy", "alembic", "aiosqlite")}  # fmt: skip


def folder(env: dict[str, str] | None = None) -> Path | None:
    """The template folder, None when templates are off."""
    env = dict(os.environ) if env is None else env
    chosen = env.get(ENV, "").strip()
    if chosen.lower() in {"0", "off", "false", "no"}:
        return None
    if chosen:
        return Path(chosen).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".cache")
    return Path(cache) / "greylab" / "store-templates"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def template_path(kind: str, env: dict[str, str] | None = None) -> Path | None:
    """Where the template of `kind` ("mlflow" or "prefect") is, for the installed versions."""
    where = folder(env)
    if where is None:
        return None
    key = [FORMAT, sqlite3.sqlite_version, *(f"{p}={_version(p)}" for p in PACKAGES[kind])]
    digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:16]
    return where / f"{kind}-{_version(kind)}-{digest}.db"


def _trusted_folder(where: Path) -> bool:
    """Owned by this user, not writable by group or others (a template shared with another
    user could carry their rows into our stores)."""
    try:
        info = where.stat()
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def is_new(target: Path) -> bool:
    """Whether `target` is a store not created yet (absent, or an empty file)."""
    try:
        return target.stat().st_size == 0
    except FileNotFoundError:
        return True


def seed(target: Path, kind: str) -> bool:
    """Copy the template of `kind` to `target` when `target` is a new store (absent or 0
    bytes) and a whole template exists in a trusted folder; True when copied. Call under the
    store's lock."""
    template = template_path(kind)
    if template is None or not is_new(target) or not _trusted_folder(template.parent):
        return False
    try:
        with open(template, "rb") as source:
            if header_problem(source.read(100), os.fstat(source.fileno()).st_size):
                return False
            source.seek(0)
            write_atomic(target, lambda out: shutil.copyfileobj(source, out), readable=True)
    except OSError:
        return False
    return True


def save(store: Path, kind: str) -> bool:
    """Keep a consistent snapshot of `store`, created just now and empty, as the template of
    `kind` (when there is none yet); True when written. Never raises: a template is only a
    shortcut."""
    template = template_path(kind)
    if template is None or template.exists():
        return False
    tmp = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    try:
        template.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _trusted_folder(template.parent):
            return False
        if is_new(store):  # nothing there to copy (connect would create an empty file)
            return False
        source = sqlite3.connect(store, timeout=5.0)
        try:
            copy = sqlite3.connect(tmp)
            try:
                source.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
                (versions,) = copy.execute("SELECT count(*) FROM alembic_version").fetchone()
            finally:
                copy.close()
        finally:
            source.close()
        if versions != 1:  # not a migrated store
            return False
        os.replace(tmp, template)
        return True
    except (OSError, sqlite3.Error):
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()

"""What data a flow may read: ingested data by reference, or files inside allowed folders.

A flow's `data`, `sensor_sheet` and `validation_data` (`PressStudy`, `DriveSearch`) may come
from a dashboard user, so they name no arbitrary file of the worker (docs/trust.md):

- `campaign:<name>` or `campaign:<name>@<hash>`: ingested data of the worker's data root
  (`ingestion.references`); the validator builds the table once (content-addressed, under
  `<data root>/campaigns/<study>/<campaign>/`) and the setting becomes its path;
- a path: after resolving `..` and symbolic links it must lie inside the data root
  (`GREYLAB_DATA_ROOT`) or a folder of `GREYLAB_ALLOWED_DATA_ROOTS` (os.pathsep-separated, set
  by the operator), or be a file the trusted CLI user named on this process's command line
  (`allow_data_paths`, kept in `GREYLAB_ALLOWED_DATA_FILES` so the processes it starts agree).

The Python API is trusted like the CLI: call `allow_data_paths` (or set
`GREYLAB_ALLOWED_DATA_ROOTS`) before building settings that name files elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOTS_ENV = "GREYLAB_ALLOWED_DATA_ROOTS"
FILES_ENV = "GREYLAB_ALLOWED_DATA_FILES"
_MAX_PATH = 4096


def _quoted(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _listed(env: str) -> list[str]:
    return [p for p in os.environ.get(env, "").split(os.pathsep) if p.strip()]


def allow_data_paths(paths: list[str]) -> None:
    """Allow files the trusted CLI (or API) user named, for this process and its children."""
    new = [str(_real(p)) for p in paths if p and not p.startswith("campaign:")]
    if new:
        os.environ[FILES_ENV] = os.pathsep.join(dict.fromkeys([*_listed(FILES_ENV), *new]))


def allowed_roots() -> list[Path]:
    """The data root and the operator's `GREYLAB_ALLOWED_DATA_ROOTS`, symbolic links resolved."""
    from runtime.settings import load_settings

    return [_real(load_settings().data_root), *(_real(p) for p in _listed(ROOTS_ENV))]


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def checked_data(value: str | None, study: str | None) -> str | None:
    """`value` if it names allowed data; for a reference (with `study`), the path of the table
    it names; `ValueError` (a pydantic validation error: the setting and why) otherwise."""
    if value is None:
        return None
    from ingestion.errors import IngestError
    from ingestion.references import is_reference

    if is_reference(value):
        if study is None:
            raise ValueError("a campaign reference names measurements, not this file")
        try:
            return str(materialise(value, study))
        except IngestError as exc:
            raise ValueError(str(exc)) from None
    if not value or len(value) > _MAX_PATH or "\0" in value:
        raise ValueError(f"expected a file path or campaign:<name>, got {_quoted(value)}")
    real = _real(value)
    roots = allowed_roots()
    if _inside(real, roots) or str(real) in set(_listed(FILES_ENV)):
        return value
    raise ValueError(
        f"{_quoted(value)} is outside the folders this worker reads data from (the data root "
        f"{roots[0]}"
        + "".join(f", {r}" for r in roots[1:])
        + "): name ingested data as "
        + _choices_text(study)
        + f", or a file inside those folders (the operator allows more folders with {ROOTS_ENV})"
    )


def _choices_text(study: str | None) -> str:
    if study is None:
        return "a file in the data root"
    from ingestion.references import campaign_choices
    from runtime.settings import load_settings

    choices = campaign_choices(load_settings().data_root, study)
    shown = ", ".join(choices[:10]) + (", ..." if len(choices) > 10 else "")
    return f"campaign:<name>[@<hash>] ({shown or 'nothing is ingested yet'})"


def materialise(reference: str, study: str) -> Path:
    """The table a reference names, stored once under the data root; its path."""
    from ingestion.references import parse_reference, reference_table
    from ingestion.rules import Study
    from runtime.settings import load_settings
    from schemas.storage import content_hash, store_table

    root = load_settings().data_root
    table = reference_table(root, Study(study), reference)
    campaign = parse_reference(reference)[0]
    return store_table(table, root / "campaigns" / study / campaign, content_hash(table))


def data_choices(study: str) -> Callable[[dict[str, Any]], None]:
    """The Prefect form's suggestions for a data field: the campaigns ingested on the worker
    (the schema is made where the deployment is served)."""

    def extra(schema: dict[str, Any]) -> None:
        from ingestion.references import campaign_choices
        from runtime.settings import load_settings

        try:
            choices = campaign_choices(load_settings().data_root, study)
        except Exception:  # no data root yet: no suggestions
            choices = []
        if choices:
            schema["examples"] = choices

    return extra

"""Serve every deployment of `deployments/prefect.yaml` from one process (`greylab serve`).

`prefect.yaml` stays the one description of deployments (entry points, schedules, default
parameters); this module turns each entry into `flow.to_deployment(...)` and serves them all
against the configured Prefect server (`PREFECT_API_URL`).
"""

from __future__ import annotations

import contextvars
import importlib
from pathlib import Path
from typing import Any

import yaml

from methods.errors import InputError

PREFECT_YAML = Path(__file__).with_name("prefect.yaml")


def load_definitions(path: Path = PREFECT_YAML) -> list[dict[str, Any]]:
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(spec.get("deployments") or [])


def load_flow(entrypoint: str) -> Any:
    """`flows/press/flow.py:press_uncertainty` -> the flow object."""
    file, sep, attribute = entrypoint.partition(":")
    if not sep or not file.endswith(".py"):
        raise InputError(f"entrypoint '{entrypoint}' must look like path/to/module.py:flow")
    module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
    return getattr(module, attribute)


#: True while `build_deployments` makes the forms: a settings schema may then read what only
#: a served form needs (the validation form's registered models from MLflow), never at import
_BUILDING = contextvars.ContextVar("greylab_building_deployments", default=False)


def building_deployments() -> bool:
    return _BUILDING.get()


def build_deployments(names: list[str] | None = None) -> list[Any]:
    """The deployments of `prefect.yaml` (all, or `names`); their forms are made now, so they
    offer what this worker has: its limits, its ingested campaigns, the models registered in
    its MLflow (`flows/validation/choices.py`, read with a short timeout)."""
    token = _BUILDING.set(True)
    try:
        return _build(names)
    finally:
        _BUILDING.reset(token)


def _build(names: list[str] | None) -> list[Any]:
    from prefect.schedules import Cron

    deployments = []
    for entry in load_definitions():
        if names and entry["name"] not in names:
            continue
        flow = load_flow(entry["entrypoint"])
        schedules = [
            Cron(s["cron"], timezone=s.get("timezone"), active=s.get("active", True))
            for s in entry.get("schedules") or []
            if "cron" in s
        ]
        deployments.append(
            flow.to_deployment(
                name=entry["name"],
                description=entry.get("description"),
                tags=entry.get("tags"),
                parameters=entry.get("parameters") or {},
                schedules=schedules or None,
                # the form and the server check the settings (docs/operations.md); scripts
                # with some settings only: deployments.runs.run_deployment
                enforce_parameter_schema=entry.get("enforce_parameter_schema", True),
            )
        )
    if names and len(deployments) != len(names):
        known = [e["name"] for e in load_definitions()]
        raise InputError(f"unknown deployment(s) in {names}; known: {known}")
    return deployments


def serve(names: list[str] | None = None) -> None:
    from prefect import serve as prefect_serve

    prefect_serve(*build_deployments(names))

"""What `greylab ingest --trigger-studies` starts for each campaign that received new data.

The data root's campaign file (`<data root>/campaigns.toml`, read and shape-checked by
`ingestion.campaigns`) names a study per campaign. Its keys are the fields of that study's
settings model, `PressStudy` (flows/press/settings.py) or `DriveSearch`
(flows/drive/settings.py), or their command-line names (`tests` for `n_tests`, `sheet`,
`sensors`); the model validates them exactly as it validates a dashboard request, with strict
types (`tests = "50"` is refused) - so plugin models must be allowed on the worker
(`models.registry.check_model_reference`, which imports nothing). Path settings (`Cli(path=True)`:
`sensor_sheet`, `validation_data`) are relative to the file's folder and must name a file inside
the data root. Settings the trigger decides cannot be set (`FIXED`).

- press: one press study on the campaign's concatenated table (`campaign_table`).
- drive: one drive search per new recording (drive recordings are separate experiments);
  the model is registered as `drive-<campaign>`; a `campaign` key naming any other campaign
  is refused (a section never registers another campaign's model from its own data).
- no entry for the campaign (or no file): the built-in press study with every default, as
  before; drive data then starts nothing.

One dict per started (or not started) study: `study`, `campaign`, `status` (`done`, `failed`,
`skipped`, `refused`: the campaign file is unusable for it), `settings` (where its settings came
from), and `reason`, `data`, `models`, `run_id`/`parent_run_id` where they apply. Nothing here
raises: the ingestion has already succeeded when studies start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from flows.cli_settings import cli_of
from flows.drive.settings import DriveSearch
from flows.press.settings import PressStudy
from flows.studies import STUDIES
from ingestion.campaigns import (
    CampaignEntry,
    CampaignFile,
    CampaignFileError,
    campaign_file_path,
    confined_path,
    quoted,
    read_campaign_file,
)
from ingestion.results import IngestReport, Status
from ingestion.rules import Study

#: the settings model of each study that ingested data starts, and the fields a campaign file
#: cannot set (with the reason): from the study registry
SETTINGS: dict[Study, type[BaseModel]] = {
    s.campaigns.data: s.settings for s in STUDIES if s.campaigns is not None
}
FIXED: dict[Study, dict[str, str]] = {
    s.campaigns.data: s.campaigns.fixed for s in STUDIES if s.campaigns is not None
}


def setting_keys(study: Study) -> dict[str, str]:
    """Key of the campaign file -> field of the study's settings model: every field by its
    name, and by its command-line name where that differs (`tests` -> `n_tests`)."""
    fields = SETTINGS[study].model_fields
    keys = {name: name for name in fields}
    for name, info in fields.items():
        alias = cli_of(info).name
        if alias and alias.replace("-", "_") not in fields:
            keys[alias.replace("-", "_")] = name
    return keys


def study_settings(entry: CampaignEntry, data_root: Path) -> dict[str, Any]:
    """The entry's settings as validated field values of its study's settings model (without
    `data`); `CampaignFileError` naming the file, campaign and key otherwise."""
    keys = setting_keys(entry.study)
    fields = SETTINGS[entry.study].model_fields
    values: dict[str, Any] = {}
    written: dict[str, str] = {}  # field -> the key the file used
    for key, value in entry.settings.items():
        name = keys.get(key)
        if name is None:
            aliases = {f: [k for k in keys if keys[k] == f and k != f] for f in fields}
            known = ", ".join(
                f + "".join(f" (or {a})" for a in aliases[f])
                for f in fields
                if f not in FIXED[entry.study]
            )
            raise CampaignFileError(
                f"{entry.where(key)}: unknown key; the settings of a {entry.study} study are "
                f"{known} (and 'study')"
            )
        if name in FIXED[entry.study]:
            raise CampaignFileError(
                f"{entry.where(key)}: cannot be set: {FIXED[entry.study][name]}"
            )
        if name in written:
            raise CampaignFileError(
                f"{entry.where(key)}: sets {name!r} again (also set as {written[name]!r})"
            )
        cli = cli_of(fields[name])
        if cli.path:
            value = confined_path(entry, key, value, data_root)
        elif cli.zero_is_none and type(value) is int and value == 0:
            value = None  # as on the command line: 0 = none (e.g. n_sensors 0 = all sensors)
        values[name], written[name] = value, key
    if entry.study is Study.drive:
        claimed = values.setdefault("campaign", entry.campaign)  # registered as drive-<campaign>
        if claimed != entry.campaign:  # another campaign's model name: never from this data
            raise CampaignFileError(
                f"{entry.where(written['campaign'])}: {quoted(claimed)} is not this section's "
                f"campaign: the model of [{entry.campaign}]'s recordings is registered as "
                f"drive-{entry.campaign}; a section may not name another campaign (drop the key, "
                f"or move the settings under [{quoted(claimed)[1:-1]}] for that campaign's files)"
            )
    validated(entry, values, written)
    return values


def validated(entry: CampaignEntry, values: dict[str, Any], written: dict[str, str]) -> Any:
    """The settings model built from `values` in strict mode (JSON types, as TOML gives)."""
    try:
        return SETTINGS[entry.study].model_validate_json(json.dumps(values), strict=True)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:3]:
            field = str(error["loc"][0]) if error["loc"] else None
            place = entry.where(written.get(field, field)) if field else entry.where()
            problems.append(f"{place}: {error['msg'].removeprefix('Value error, ')[:300]}")
        raise CampaignFileError("; ".join(problems)) from None


def start_studies(report: IngestReport, data_root: Path) -> list[dict[str, Any]]:
    """The studies for the campaigns with new data in `report` (module docstring)."""
    if not report.new_data:
        return []
    try:
        config = read_campaign_file(data_root)
    except CampaignFileError as exc:  # the whole file is unusable: every study is refused
        return [
            {"study": s, "campaign": c, **_refused(exc, campaign_file_path(data_root))}
            for s, c in report.new_data
        ]
    studies: list[dict[str, Any]] = []
    for study, campaign in report.new_data:
        parts = [o.target for o in report.outcomes if o.status is Status.ingested
                 and o.study == study and o.campaign == campaign and o.target]  # fmt: skip
        studies += start_study(Study(study), campaign, data_root, config, parts)
    return studies


def start_study(
    study: Study, campaign: str, data_root: Path, config: CampaignFile | None, parts: list[str]
) -> list[dict[str, Any]]:
    """The study (or studies) for one campaign's new data; failures are reported, not raised."""
    entry_of: dict[str, Any] = {"study": study.value, "campaign": campaign}
    path = campaign_file_path(data_root)
    try:
        entry = config.entry(campaign) if config else None
        if entry is None:
            where = f"no [{campaign}] in {path}" if config else f"no {path}"
            entry_of["settings"] = f"built-in press study ({where})"
            values: dict[str, Any] = {}
        else:
            entry_of["settings"] = f"{path} [{campaign}]"
            values = study_settings(entry, data_root)
    except CampaignFileError as exc:
        return [{**entry_of, **_refused(exc, path)}]
    if entry is None and study is Study.drive:
        reason = (
            f"no study is started for drive data without [{campaign}] study = 'drive' in {path}"
        )
        return [{**entry_of, "status": "skipped", "reason": reason}]
    if entry is not None and entry.study is not study:
        kind = entry.study.value
        reason = f"{entry.where()} configures a {kind} study; its new {study} data starts none"
        return [{**entry_of, "status": "skipped", "reason": reason}]
    if study is Study.press:
        return [_press(entry_of, data_root, values)]
    return [_drive(entry_of, data_root, values, part) for part in parts]


def _press(entry: dict[str, Any], data_root: Path, values: dict[str, Any]) -> dict[str, Any]:
    from flows.press.flow import run_press_study
    from tasks.ingest import tasks as ingest_tasks

    try:
        path = ingest_tasks.campaign_table_task(str(data_root), "press", entry["campaign"])
        settings = PressStudy.model_validate_json(json.dumps({**values, "data": path}), strict=True)
        entry["models"] = list(settings.models)
        result = run_press_study(settings)
    except Exception as exc:  # the data is stored: a failing study is reported
        return {**entry, "status": "failed", "reason": _reason(exc)}
    return {**entry, "status": "done", "data": path, "parent_run_id": result.parent_run_id}


def _drive(
    entry: dict[str, Any], data_root: Path, values: dict[str, Any], part: str
) -> dict[str, Any]:
    from flows.drive.flow import run_drive_search
    from tasks.ingest import tasks as ingest_tasks

    entry = {**entry, "part": part}
    try:
        path = ingest_tasks.recording_table_task(str(data_root), entry["campaign"], part)
        settings = DriveSearch.model_validate_json(
            json.dumps({**values, "data": path}), strict=True
        )
        result = run_drive_search(settings)
    except Exception as exc:  # the data is stored: a failing study is reported
        return {**entry, "status": "failed", "reason": _reason(exc)}
    return {**entry, "status": "done", "data": path, "run_id": result.run_id}


def _refused(exc: CampaignFileError, path: Path) -> dict[str, Any]:
    reason = f"{exc}; no study started (the data is stored)"
    return {"settings": str(path), "status": "refused", "reason": reason}


def _reason(exc: Exception) -> str:
    from methods.errors import InputError

    if isinstance(exc, InputError):
        return str(exc)[:2000]
    return f"{type(exc).__name__}: {quoted(str(exc), 300)}"

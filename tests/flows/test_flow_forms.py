"""The Prefect form of every study flow is complete: a required settings model with its
defaults shown (not an optional parameter collapsed to None), static defaults, a description
for every field, a range for every number, an explanation for every choice, and the models
of the press as a multi-select of what this worker allows."""

from __future__ import annotations

from typing import Any

import pytest
from prefect.utilities.callables import parameter_schema

from flows.drive.flow import drive_structure_search
from flows.ingest.flow import ingest_lab_data
from flows.inverse.flow import inverse_simulation
from flows.press.flow import press_uncertainty

FLOWS = {"press": press_uncertainty, "drive": drive_structure_search,
         "inverse": inverse_simulation, "ingest": ingest_lab_data}  # fmt: skip


def _schema(name: str) -> dict[str, Any]:
    return parameter_schema(FLOWS[name].fn).model_dump()


def _settings(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    (parameter,) = schema["properties"].values()
    model = schema["definitions"][parameter["$ref"].rsplit("/", 1)[-1]]
    return parameter, model


def _types(prop: dict[str, Any]) -> set[str]:
    found = {prop.get("type")} | {p.get("type") for p in prop.get("anyOf", [])}
    return {t for t in found if t}


@pytest.mark.parametrize("name", FLOWS)
def test_the_form_opens_with_every_default(name: str) -> None:
    parameter, model = _settings(_schema(name))
    assert "anyOf" not in parameter  # not `Settings | None`: no switch set to None
    defaults = parameter["default"]
    assert set(defaults) == set(model["properties"])  # every field has its default in the form
    for field, prop in model["properties"].items():
        assert prop.get("description"), f"{name}.{field}: no description"
        if _types(prop) & {"integer", "number"}:
            ranged = [prop, *prop.get("anyOf", [])]
            assert any("minimum" in p or "exclusiveMinimum" in p for p in ranged), (
                f"{name}.{field}: no lower bound shown"
            )


@pytest.mark.parametrize("name", FLOWS)
def test_every_choice_is_explained(name: str) -> None:
    schema = _schema(name)
    for definition, spec in schema["definitions"].items():
        if "enum" in spec:
            assert spec.get("description"), f"{name}: choices of {definition} not explained"
            for value in spec["enum"]:
                assert str(value) in spec["description"], (definition, value)


def test_press_models_are_a_multi_select_of_the_allowed_models(monkeypatch) -> None:
    monkeypatch.setenv("GREYLAB_ALLOWED_MODELS", "labmodels.spring:Spring")
    _, model = _settings(_schema("press"))
    models = model["properties"]["models"]
    assert models["default"] == ["M1", "M2", "M3"]  # static: shown in the form
    assert models["items"]["enum"] == ["M1", "M2", "M3", "labmodels.spring:Spring"]
    assert models["uniqueItems"] is True


@pytest.mark.parametrize("name", FLOWS)
def test_the_form_explains_every_choice_where_it_is_made(name: str) -> None:
    schema = _schema(name)
    _, model = _settings(schema)
    for field, prop in model["properties"].items():
        refs = [prop.get("$ref", "")] + [p.get("$ref", "") for p in prop.get("anyOf", [])]
        for ref in filter(None, refs):
            choices = schema["definitions"][ref.rsplit("/", 1)[-1]].get("enum", [])
            for value in choices:
                assert str(value) in prop["description"], f"{name}.{field}: {value} unexplained"


@pytest.mark.parametrize(
    ("settings", "values", "message"),
    [
        ("drive", {"campaign": "../../etc"}, "campaign"),
        ("drive", {"campaign": "a b<script>"}, "campaign"),
        ("press", {"design_model": "os:system"}, "os:system"),
        ("press", {"design_model": "M9"}, "M9"),
        ("press", {"twin_seed": -1}, "twin_seed"),
    ],
)  # fmt: skip
def test_hostile_dashboard_values_are_refused_by_the_settings(settings, values, message) -> None:
    """Values typed into the form (or sent to the API) that name paths or code, or are out of
    range, are refused with the field named, before anything runs."""
    from pydantic import ValidationError

    from flows.drive.settings import DriveSearch
    from flows.press.settings import PressStudy

    model = {"press": PressStudy, "drive": DriveSearch}[settings]
    with pytest.raises((ValidationError, ValueError)) as caught:
        model(**values)
    assert message in str(caught.value)


def test_a_missing_validation_recording_fails_before_any_server_starts(tmp_path, capsys) -> None:
    from flows.cli import main

    code = main(["drive", "identify", "--validation-data", str(tmp_path / "nope.csv")])
    assert code == 2 and "nope.csv" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["press", "drive"])
def test_the_form_has_the_papers_switch(name: str) -> None:
    # `paper`: the paper's own settings one tick away (docs/methods.md §1.7, §2.6)
    parameter, model = _settings(_schema(name))
    prop = model["properties"]["paper"]
    assert prop["type"] == "boolean" and prop["default"] is False
    assert parameter["default"]["paper"] is False
    assert "paper" in prop["description"] and "docs/methods.md §" in prop["description"]

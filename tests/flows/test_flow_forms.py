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
from flows.validation.flow import model_validation

FLOWS = {"press": press_uncertainty, "drive": drive_structure_search,
         "inverse": inverse_simulation, "ingest": ingest_lab_data}  # fmt: skip
#: every form, the validation's too (its settings have required fields: no default object)
FORMS = {**FLOWS, "validation": model_validation}


def _schema(name: str) -> dict[str, Any]:
    return parameter_schema(FORMS[name].fn).model_dump()


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


@pytest.mark.parametrize("name", FLOWS)
def test_numbers_and_choices_cannot_be_left_empty_in_the_form(name: str) -> None:
    """Text typed into a number field leaves it empty and the form drops it (seen in the
    browser: the submitted study lacks the key, so the default ran). Checked with Prefect's
    own validator, as the form and the server call it (with its schema preprocessing): the
    prefilled form passes, and a form submission (every field, as the form sends them) that
    lacks a field that cannot be empty is refused at that field; an API caller's partial
    settings need the check off (the flow fills in the defaults). Optional fields (empty
    means something, said in the description) may be left out, or sent as the prefilled null."""
    from prefect.utilities.schema_tools.validation import build_error_obj, validate

    schema = _schema(name)
    parameter, model = _settings(schema)
    (key,) = schema["properties"]  # the flow's one parameter: its settings model
    form = dict(parameter["default"])  # what the form sends untouched
    assert validate({key: form}, schema) == []
    assert None in form.values(), "a prefilled null: the case the server must accept"
    for field, prop in model["properties"].items():
        left_out = validate({key: {k: v for k, v in form.items() if k != field}}, schema)
        if field not in model["required"]:
            assert "empty" in prop["description"], f"{name}.{field}: what empty means"
            assert left_out == [] and validate({key: {**form, field: None}}, schema) == []
            continue
        if prop.get("type") == "boolean":
            continue  # a checkbox always has a value
        assert left_out, f"{name}.{field}: left empty, the form would run the default"
        assert build_error_obj(left_out)["errors"][0]["errors"][0]["property"] == field
        assert validate({key: {**form, field: None}}, schema) != [], f"{name}.{field}: null"
    # an API caller's partial settings: refused by the schema (the form shows no
    # "(Optional)"), run with the check off (deployments.runs) and filled in by the flow
    some = {"experiment": "api-caller"}
    assert validate({key: some}, schema, raise_on_error=False) != []
    assert FLOWS[name].validate_parameters({key: some})[key].experiment == "api-caller"


@pytest.mark.parametrize("name", FORMS)
def test_no_field_is_a_toggle_to_none(name: str) -> None:
    """An optional field is a plain field, not required, without a null default: Prefect's UI
    shows an `anyOf` with a null alternative as a toggle whose null side reads 'Property is
    type "None"' (`SchemaFormPropertyNull`); the flow's settings fill None back in."""
    import json

    schema = _schema(name)
    _, model = _settings(schema)
    assert '"null"' not in json.dumps(model), f"{name}: a null alternative left"
    for field, prop in model["properties"].items():
        if field not in model["required"]:
            assert "type" in prop and prop.get("default", "none") is not None, (name, field)
    optional = [f for f in model["properties"] if f not in model["required"]]
    assert optional, f"{name}: no optional field to check"
    if name != "validation":  # (its model and data have no default)
        (key,) = schema["properties"]
        filled = FORMS[name].validate_parameters({key: {}})[key]  # the form left them out
        assert all(getattr(filled, f) is None for f in optional), optional


def test_the_sensor_count_is_a_required_number_where_0_means_all() -> None:
    """The one optional number with a number as default (press sensors, 2): required in the
    form (text typed there is refused, not run as 2), from 0, and 0 is all (None)."""
    from flows.press.settings import PressStudy

    _, model = _settings(_schema("press"))
    prop = model["properties"]["n_sensors"]
    assert "n_sensors" in model["required"] and prop["minimum"] == 0 and prop["default"] == 2
    assert "0 = all" in prop["description"] and "(range: >= 0)" in prop["description"]
    from flows.cli_settings import _help

    assert _help(PressStudy.model_fields["n_sensors"], int).endswith("0 = all (all says the "
                                                                     "same) (>= 0)")  # fmt: skip
    assert PressStudy(n_sensors=0).n_sensors is None
    assert PressStudy(n_sensors=3).n_sensors == 3
    with pytest.raises(ValueError, match="n_sensors"):
        PressStudy(n_sensors=-1)


@pytest.mark.parametrize(
    ("name", "field", "key", "variable", "per"),
    [("press", "n_tests", "maximum", "GREYLAB_MAX_TESTS", 1),
     ("press", "models", "maxItems", "GREYLAB_MAX_MODELS", 1),
     ("drive", "population", "maximum", "GREYLAB_MAX_POPULATION", 1),
     ("drive", "generations", "maximum", "GREYLAB_MAX_GP_EVALUATIONS", 2),
     ("drive", "workers", "maximum", "GREYLAB_MAX_WORKERS", 1),
     ("inverse", "systems", "maxItems", "GREYLAB_MAX_INVERSE_RUNS", 1)],
)  # fmt: skip
def test_form_maxima_are_the_workers_limits(monkeypatch, name, field, key, variable, per) -> None:
    """Read when the schema is built (where the deployment is served): a worker with a
    lower limit offers a lower maximum, and the description shows the range."""
    from models.limits import limit

    _, model = _settings(_schema(name))
    assert model["properties"][field][key] == limit(variable) // per  # the default limit
    monkeypatch.setenv(variable, "14")
    _, model = _settings(_schema(name))
    assert model["properties"][field][key] == 14 // per
    if key == "maximum":
        assert f"to {14 // per})" in model["properties"][field]["description"]


@pytest.mark.parametrize("name", FLOWS)
def test_descriptions_speak_the_labs_words(name: str) -> None:
    """No command-line flag, environment variable, module path or Python class name in the
    form; JSON fields say so with an example."""
    import json
    import re

    schema = _schema(name)
    _, model = _settings(schema)
    for field, prop in model["properties"].items():
        text = prop["description"]
        assert not re.search(r"(^|\s|\()--[a-z]", text), f"{name}.{field}: a flag in {text!r}"
        assert "GREYLAB_" not in text and "CLI" not in text, f"{name}.{field}: {text!r}"
        assert not re.search(r"\w+/\w+\.py|\bflows\.|\bmodels\.", text), f"{name}.{field}"
        assert not re.search(r"\b[A-Z][a-z]+[A-Z]\w+\b", text), f"{name}.{field}: {text!r}"
        if prop.get("type") == "object" or any(p.get("type") == "object"
                                               for p in prop.get("anyOf", [])):  # fmt: skip
            example = re.search(r"e\.g\. (\{.*?\})", text)
            assert "JSON" in text and example, f"{name}.{field}: say JSON, with an example"
            json.loads(example.group(1))
    assert "DrivePreset" not in json.dumps(model) and "$ref" not in json.dumps(model)


def test_design_model_and_submodels_are_choices(monkeypatch) -> None:
    monkeypatch.setenv("GREYLAB_ALLOWED_MODELS", "labmodels.spring:Spring")
    _, press = _settings(_schema("press"))
    choice = press["properties"]["design_model"]
    assert choice["enum"] == ["M1", "M2", "M3", "labmodels.spring:Spring", None]  # None: empty
    _, drive = _settings(_schema("drive"))
    for field in ("structure", "reference_structure"):
        assert "two_mass" in drive["properties"][field]["items"]["enum"]


def test_a_wrong_reference_submodel_is_refused_by_the_settings() -> None:
    """Before any task: the flow run fails once with the message (a task would retry it)."""
    from pydantic import ValidationError

    from flows.drive.settings import DriveSearch

    with pytest.raises(ValidationError, match="element 2 'colomb': not a submodel"):
        DriveSearch(reference_structure=["one_mass", "colomb"])

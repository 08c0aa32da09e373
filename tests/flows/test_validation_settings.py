"""The validation flow's settings treat every value as hostile (issue 27): a dashboard user
names a registered model and a version or alias, never a path or URI that chooses what is
loaded, and data only as every flow's data (`flows.data_refs`). Each refusal names the field.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from flows.validation.settings import ModelKind, ModelValidation


def _settings(**values: object) -> ModelValidation:
    return ModelValidation.model_validate({"model": "press-M3", "data": __file__, **values})


@pytest.mark.parametrize(
    ("model", "version", "uri"),
    [("press-M3", "1", "models:/press-M3/1"), ("press-M3", "champion", "models:/press-M3@champion"),
     ("press-M3", "latest", "models:/press-M3/latest"), ("press-my.lab_M-4", "12",
     "models:/press-my.lab_M-4/12")],
)  # fmt: skip
def test_the_model_uri_is_built_from_the_checked_name_and_version(model, version, uri) -> None:
    assert _settings(model=model, version=version).model_uri() == uri


def test_defaults_are_the_press_champion_in_the_validation_experiment() -> None:
    settings = _settings()
    assert settings.kind is ModelKind.press and settings.version == "champion"
    assert settings.experiment == "greylab-validation"


HOSTILE = [
    ("model", "runs:/0123456789abcdef0123456789abcdef/model"),
    ("model", "models:/press-M3/1"),
    ("model", "file:///etc/passwd"),
    ("model", "/tmp/press-M3"),
    ("model", "press-M3/../../drive-x"),
    ("model", "press-../../x"),
    ("model", "press-M3\nevil"),
    ("model", "press-M3@champion"),
    ("model", "press-"),
    ("model", "press-" + "M" * 200),
    ("model", "mlflow-artifacts:/x"),
    ("version", "1/../../2"),
    ("version", "../1"),
    ("version", "@champion"),
    ("version", "0"),
    ("version", "1 OR 1=1"),
    ("version", "a" * 100),
    ("version", ""),
    ("experiment", "../outside"),
    ("experiment", "a/b"),
    ("kind", "python"),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE)
def test_hostile_values_are_refused_naming_the_field(field: str, value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _settings(**{field: value})
    assert field in {str(e["loc"][0]) for e in caught.value.errors()}, caught.value


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="code"):
        _settings(code="import os")


def test_a_model_of_the_other_kind_and_options_of_the_other_kind_are_refused() -> None:
    with pytest.raises(ValidationError, match="is a drive model; choose kind drive"):
        _settings(model="drive-emps")
    with pytest.raises(ValidationError, match="sensor sheet is for press models only"):
        _settings(kind="drive", model="drive-emps", sensor_sheet=__file__)
    with pytest.raises(ValidationError, match="emps_decimate"):
        _settings(emps_decimate=10)
    assert _settings(kind="drive", model="drive-emps", emps_decimate=10).emps_decimate == 10


def test_data_outside_the_workers_folders_is_refused(tmp_path: Path, monkeypatch) -> None:
    """Without the test session's allow-everything root (tests/conftest.py), as on a worker:
    only the data root (and campaign references) may be read."""
    monkeypatch.delenv("GREYLAB_ALLOWED_DATA_ROOTS", raising=False)
    monkeypatch.delenv("GREYLAB_ALLOWED_DATA_FILES", raising=False)
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GREYLAB_DATA_ROOT", str(root))
    inside = root / "new.csv"
    inside.write_text("x\n")
    (root / "link").symlink_to("/etc")
    assert _settings(data=str(inside)).data == str(inside)
    for value in ("/etc/passwd", str(root / ".." / "elsewhere.csv"), str(root / "link" / "passwd")):
        with pytest.raises(ValidationError, match="outside the folders this worker reads"):
            _settings(data=value)
        with pytest.raises(ValidationError, match="outside the folders this worker reads"):
            _settings(data=str(inside), sensor_sheet=value)
    with pytest.raises(ValidationError, match="campaign"):
        _settings(data="campaign:../../etc")
    with pytest.raises(ValidationError):
        _settings(data="campaign:nothing-ingested")


def test_the_command_line_requires_the_model_and_the_data(capsys) -> None:
    """Fields without a default are required options (not "default: PydanticUndefined"), and a
    choice's explanation is said once."""
    from flows.cli import main

    assert main(["validation", "run", "--data", __file__]) == 2
    assert "Missing option '--model'" in capsys.readouterr().err
    assert main(["validation", "run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "PydanticUndefined" not in text and text.count("[required]") == 2
    assert text.count("open-loop simulation") == 1

"""The campaign file's keys mapped onto the study settings models (`flows.campaign_studies`):
the models validate them (strict types, the worker's allow-list, limits); every refusal names
the file, the campaign and the key. No study runs here (see test_ingest_flow.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flows.campaign_studies import setting_keys, start_study, study_settings
from flows.press.settings import PressStudy
from ingestion.campaigns import CampaignFileError, read_campaign_file
from ingestion.rules import Study
from tests.flows.spring_lab import MODEL, install_spring, write_sheet


def _config(tmp_path: Path, text: str):
    root = tmp_path / "data"
    write_sheet(root / "sheets" / "spring.csv")
    (root / "campaigns.toml").write_text(text)
    config = read_campaign_file(root)
    assert config is not None
    return root, config


def _settings(tmp_path: Path, table: str, campaign: str = "c") -> dict:
    root, config = _config(tmp_path, f"[{campaign}]\n{table}\n")
    entry = config.entry(campaign)
    assert entry is not None
    return study_settings(entry, root)


def test_keys_are_the_fields_and_their_command_line_names() -> None:
    keys = setting_keys(Study.press)
    assert {k: keys[k] for k in ("tests", "n_tests", "sheet", "sensor_sheet", "sensors")} == {
        "tests": "n_tests", "n_tests": "n_tests", "sheet": "sensor_sheet",
        "sensor_sheet": "sensor_sheet", "sensors": "n_sensors",
    }  # fmt: skip
    assert set(PressStudy.model_fields) <= set(keys)
    assert setting_keys(Study.drive)["population"] == "population"


def test_press_settings_with_an_allowed_plugin(tmp_path: Path, monkeypatch) -> None:
    install_spring(tmp_path, monkeypatch)
    table = f'study = "press"\nmodels = ["{MODEL}", "M1"]\ndesign_model = "{MODEL}"\n'
    table += 'sensor_sheet = "sheets/spring.csv"\nn_sensors = 0\ntests = 7\ncriterion = "D"\n'
    values = _settings(tmp_path, table)
    assert values == {
        "models": [MODEL, "M1"], "design_model": MODEL, "n_tests": 7, "criterion": "D",
        "sensor_sheet": str((tmp_path / "data" / "sheets" / "spring.csv").resolve()),
        "n_sensors": None,  # 0 = every sensor, as on the command line
    }  # fmt: skip
    assert "labspring" not in sys.modules  # checked against the allow-list, never imported


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ('study = "press"\nmodelz = ["M1"]', "modelz", "unknown key; the settings of a press"),
        ('study = "press"\ndata = "x.csv"', "data", "cannot be set: the study runs on"),
        ('study = "press"\ntwin_seed = 3', "twin_seed", "cannot be set: used only without"),
        ('study = "press"\ntests = 5\nn_tests = 6', "n_tests", "sets 'n_tests' again"),
        ('study = "press"\ntests = "50"', "tests", "Input should be a valid integer"),
        ('study = "press"\ntests = 50000', "tests", "GREYLAB_MAX_TESTS"),
        ('study = "press"\nmodels = "M1"', "models", "valid array"),
        ('study = "press"\nmodels = ["M4"]', "models", "unknown model 'M4'"),
        (f'study = "press"\nmodels = ["{MODEL}"]', "models", "not allowed for flow runs"),
        (f'study = "press"\ndesign_model = "{MODEL}"', "design_model", "not allowed for flow"),
        ('study = "press"\ncache = 1', "cache", "valid boolean"),
        ('study = "press"\nsheet = "../../etc/passwd"', "sheet", "outside the data root"),
        ('study = "press"\nexperiment = "../x"', "experiment", ""),
        ('study = "drive"\nmodels = ["M1"]', "models", "unknown key; the settings of a drive"),
        ('study = "drive"\npopulation = 100000', None, "GREYLAB_MAX_POPULATION"),
    ],
)
def test_refusals_name_file_campaign_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, key: str | None, words: str
) -> None:
    install_spring(tmp_path, monkeypatch, allow=False)
    with pytest.raises(CampaignFileError) as error:
        _settings(tmp_path, table)
    message = str(error.value)
    place = f"{tmp_path / 'data' / 'campaigns.toml'}: campaign 'c'"
    assert message.startswith(place + (f", key {key!r}: " if key else ": ")), message
    assert words in message and len(message) < 1200, message
    assert "labspring" not in sys.modules


def test_drive_settings_register_the_model_under_the_campaign(tmp_path: Path) -> None:
    values = _settings(tmp_path, 'study = "drive"\npopulation = 4\ngenerations = 2', "rig-3")
    assert values == {"population": 4, "generations": 2, "campaign": "rig-3"}
    same = _settings(tmp_path, 'study = "drive"\ncampaign = "rig-4"', "rig-4")
    assert same == {"campaign": "rig-4"}  # repeating its own name is fine
    # another campaign's name is refused (issue 28; tests/hostile/test_campaign_integrity.py)
    with pytest.raises(CampaignFileError, match=r"campaign 'rig-4', key 'campaign'"):
        _settings(tmp_path, 'study = "drive"\ncampaign = "emps"', "rig-4")


def test_start_study_without_entry_wrong_kind_or_bad_entry(tmp_path: Path) -> None:
    """None of these starts a study or touches the data (no Prefect needed)."""
    text = '[rig]\nstudy = "drive"\n[line-1]\nstudy = "press"\nmodelz = 1\n'
    root, config = _config(tmp_path, text)
    (skipped,) = start_study(Study.press, "rig", root, config, ["part"])
    assert skipped["status"] == "skipped" and "configures a drive study" in skipped["reason"]
    assert skipped["settings"] == f"{root / 'campaigns.toml'} [rig]"
    (refused,) = start_study(Study.press, "line-1", root, config, ["part"])
    assert refused["status"] == "refused" and "key 'modelz': unknown key" in refused["reason"]
    assert "no study started (the data is stored)" in refused["reason"]
    (drive,) = start_study(Study.drive, "other", root, config, ["part"])
    assert drive["status"] == "skipped" and "without [other] study = 'drive'" in drive["reason"]
    assert drive["settings"] == f"built-in press study (no [other] in {root / 'campaigns.toml'})"


def test_the_readme_example_is_a_valid_campaign_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    from models import registry

    readme = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    blocks = re.findall(r"```toml\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    (example,) = [b for b in blocks if "[spring-1]" in b]
    monkeypatch.setenv(registry.ALLOWED_ENV, "spring:Spring,spring:StiffeningSpring")
    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    root, config = _config(tmp_path, example)
    write_sheet(root / "sheets" / "spring.sensors.csv")
    spring, rig = config.entry("spring-1"), config.entry("rig-2")
    assert spring is not None and rig is not None
    assert study_settings(spring, root)["models"] == ["spring:Spring", "spring:StiffeningSpring"]
    assert study_settings(rig, root) == {"population": 8, "generations": 5, "campaign": "rig-2"}

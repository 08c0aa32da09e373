"""The campaign file's shape (`ingestion.campaigns`): one table per campaign, a study kind,
plain values, paths confined to the data root; problems name the file, campaign and key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingestion.campaigns import (
    CampaignFileError,
    confined_path,
    read_campaign_file,
)
from ingestion.rules import Study

GOOD = """
[line-1]
study = "press"
models = ["M1", "springmod:spring"]
sensor_sheet = "sheets/line-1.csv"
tests = 20

[rig]
study = "drive"
population = 4

[no-kind]
models = ["M1"]

[odd-kind]
study = "pressing"

[dated]
study = "press"
experiment = 2026-05-01
"""


def _root(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "data"
    root.mkdir(exist_ok=True)
    (root / "campaigns.toml").write_text(text)
    return root


def test_no_file_means_no_configuration(tmp_path: Path) -> None:
    assert read_campaign_file(tmp_path) is None


def test_entries_and_per_campaign_problems(tmp_path: Path) -> None:
    root = _root(tmp_path, GOOD)
    config = read_campaign_file(root)
    assert config is not None and config.path == root / "campaigns.toml"
    line = config.entry("line-1")
    assert line is not None and line.study is Study.press
    assert dict(line.settings) == {
        "models": ["M1", "springmod:spring"],
        "sensor_sheet": "sheets/line-1.csv",
        "tests": 20,
    }
    rig = config.entry("rig")
    assert rig is not None and rig.study is Study.drive
    assert config.entry("line-2") is None  # no entry: the caller's default
    file = str(root / "campaigns.toml")
    expected = {
        "no-kind": f"{file}: campaign 'no-kind': missing key 'study' (one of ['press', 'drive'])",
        "odd-kind": f"{file}: campaign 'odd-kind', key 'study': unknown study kind 'pressing'",
        "dated": f"{file}: campaign 'dated', key 'experiment': a TOML date or time",
    }
    for campaign, start in expected.items():
        with pytest.raises(CampaignFileError) as error:
            config.entry(campaign)
        assert str(error.value).startswith(start), str(error.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[Line_1]\nstudy = "press"\n', "campaign 'Line_1': not a campaign name"),
        ('study = "press"\n', "top-level key 'study' is not a campaign table"),
        ("[line-1\nstudy = 1\n", "not valid TOML"),
    ],
)
def test_file_level_problems_name_the_file(tmp_path: Path, text: str, words: str) -> None:
    root = _root(tmp_path, text)
    with pytest.raises(CampaignFileError) as error:
        read_campaign_file(root)
    assert str(error.value).startswith(str(root / "campaigns.toml"))
    assert words in str(error.value)


def test_paths_are_relative_to_the_file_and_stay_in_the_data_root(tmp_path: Path) -> None:
    root = _root(tmp_path, '[line-1]\nstudy = "press"\n')
    (root / "sheets").mkdir()
    (root / "sheets" / "s.csv").write_text("sensor,sigma_um\n")
    (tmp_path / "outside.csv").write_text("sensor,sigma_um\n")
    os.symlink(tmp_path / "outside.csv", root / "sheets" / "link.csv")
    config = read_campaign_file(root)
    assert config is not None
    entry = config.entry("line-1")
    assert entry is not None
    good = confined_path(entry, "sensor_sheet", "sheets/../sheets/s.csv", root)
    assert good == str((root / "sheets" / "s.csv").resolve())
    refused = {
        "../outside.csv": "outside the data root",
        "../../etc/passwd": "outside the data root",
        "/etc/passwd": "outside the data root",
        "sheets/link.csv": "outside the data root",  # a symlink out of the root
        "sheets/missing.csv": "no such file",
        "sheets": "no such file",  # a folder
        "": "expected a file path",
        "a\0b": "expected a file path",
        "x" * 5000: "expected a file path",
    }
    for value, words in refused.items():
        with pytest.raises(CampaignFileError) as error:
            confined_path(entry, "sensor_sheet", value, root)
        message = str(error.value)
        assert message.startswith(
            f"{root / 'campaigns.toml'}: campaign 'line-1', key 'sensor_sheet'"
        )
        assert words in message and len(message) < 500, message
    with pytest.raises(CampaignFileError, match="expected a file path"):
        confined_path(entry, "sensor_sheet", 3, root)

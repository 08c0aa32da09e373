"""The drive search's checkpoint (its cross-run cache) is keyed on data, settings and code."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.drive import flow as drive_flow
from flows.drive.flow import DriveSearch, checkpoint_dir


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))


def test_same_search_same_checkpoint() -> None:
    assert checkpoint_dir("abc", DriveSearch()) == checkpoint_dir("abc", DriveSearch())
    # resuming or not is no part of what the checkpoint holds
    assert checkpoint_dir("abc", DriveSearch()) == checkpoint_dir("abc", DriveSearch(resume=False))


def test_other_data_or_settings_other_checkpoint() -> None:
    base = checkpoint_dir("abc", DriveSearch())
    assert checkpoint_dir("abd", DriveSearch()) != base
    assert checkpoint_dir("abc", DriveSearch(seed=1)) != base


def test_other_code_other_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    base = checkpoint_dir("abc", DriveSearch())
    monkeypatch.setattr(drive_flow, "code_fingerprint", lambda: "9.9+fixed-simulator")
    assert checkpoint_dir("abc", DriveSearch()) != base

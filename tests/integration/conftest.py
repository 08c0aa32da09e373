"""Shared fixtures of the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """greylab's runtime folder and a SQLite MLflow store in a temporary folder."""
    home = tmp_path / "home"
    monkeypatch.setenv("GREYLAB_HOME", str(home))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{home / 'mlflow.db'}")
    monkeypatch.delenv("GREYLAB_DASK_ADDRESS", raising=False)
    return home

"""Fixtures of the flow tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def private_prefect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from prefect.settings import PREFECT_HOME, temporary_settings

    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "greylab"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with temporary_settings(updates={PREFECT_HOME: tmp_path / "prefect"}):
        yield

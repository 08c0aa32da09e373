"""The ingestion core needs no Prefect and no MLflow; a private home keeps settings local."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))

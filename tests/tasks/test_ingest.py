"""The Prefect tasks of ingestion are thin: each calls the core (`ingestion`) and returns what
it returns; the names flows import from `tasks.ingest.tasks` stay available."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import ingestion.readers
import ingestion.run
from tasks.ingest import tasks as ingest
from tests.tasks.ingest_data import press_frame, write


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))


def test_reexported_names_are_the_core_ones() -> None:
    assert ingest.ingest_inbox is ingestion.run.ingest_inbox
    assert ingest.campaign_table is ingestion.readers.campaign_table
    assert ingest.read_dataset is ingestion.readers.read_dataset
    for name in ingest.__all__:
        assert hasattr(ingest, name), name


def test_tasks_call_the_core_on_real_files(tmp_path: Path) -> None:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    rng = np.random.default_rng(3)
    write(inbox, "line-1__a.csv", press_frame(rng, n_series=2))
    write(inbox, "line-1__b.csv", press_frame(rng, n_series=1))
    dry = ingest.ingest_inbox_task.fn(str(inbox), str(inbox.parent / "data"), dry_run=True)
    assert dry.dry_run and dry.count(ingest.Status.ingested) == 2 and not root.exists()
    report = ingest.ingest_inbox_task.fn(str(inbox), str(root), campaign="line-1")
    assert report.count(ingest.Status.ingested) == 2 and report.rows == 24
    path = Path(ingest.campaign_table_task.fn(str(root), "press", "line-1"))
    assert path.parent == root / "campaigns" / "press" / "line-1"
    table = pd.read_parquet(path)
    assert sorted(table["series"].unique()) == [0, 1, 2] and len(table) == 24
    again = ingest.campaign_table_task.fn(str(root), "press", "line-1")
    assert again == str(path)  # content-addressed: the same table, the same file

"""Reading the dataset back, and the report as plain JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ingestion.errors import IngestError
from ingestion.readers import campaign_table, read_dataset
from ingestion.results import IngestReport
from ingestion.run import ingest_inbox
from tests.ingestion.helpers import (
    one_press_file,
)
from tests.tasks.ingest_data import drive_frame, press_frame, write


def test_campaign_table_renumbers_series_across_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    write(inbox, "line-1__a.csv", press_frame(rng, n_series=2))
    write(inbox, "line-1__b.parquet", press_frame(rng, n_series=3))
    write(inbox, "line-2__c.csv", press_frame(rng, n_series=2))
    write(inbox, "rig__d.csv", drive_frame(rng))
    report = ingest_inbox(inbox, root)
    assert report.new_data == [("drive", "rig"), ("press", "line-1"), ("press", "line-2")]
    table = campaign_table(root, "press", "line-1")
    assert sorted(table["series"].unique()) == [0, 1, 2, 3, 4]
    assert len(table) == 5 * 4 * 2
    with pytest.raises(IngestError, match="no ingested press data"):
        campaign_table(root, "press", "nope")
    with pytest.raises(IngestError, match="not concatenated"):
        campaign_table(root, "drive", "rig")


def test_report_is_plain_json(tmp_path: Path) -> None:
    inbox, root, _ = one_press_file(tmp_path)
    (inbox / "bad.csv").write_text("")
    report = ingest_inbox(inbox, root)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["counts"]["ingested"] == 1 and data["counts"]["quarantined"] == 1
    assert data["rows"] == 16
    assert "bad.csv: " in report.summary() and "empty" in report.summary()
    assert isinstance(report, IngestReport)


def test_numeric_looking_campaigns_read_back_as_names(tmp_path: Path) -> None:
    inbox, root, _ = one_press_file(tmp_path, name="007__a.csv")
    ingest_inbox(inbox, root)
    assert set(read_dataset(root, "press")["campaign"]) == {"007"}

"""The 50-file inbox over three runs: every valid row exactly once."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

from ingestion import job
from ingestion.names import safe_name
from ingestion.readers import read_dataset
from ingestion.results import Status
from ingestion.run import ingest_inbox
from tests.ingestion.helpers import (
    DRIVE_KEY,
    PRESS_KEY,
    Crash,
    expected_rows,
    ledger_of,
    sorted_rows,
)
from tests.tasks.ingest_data import build_inbox


def test_fifty_files_three_runs_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    lab = build_inbox(inbox, rng)
    assert len(list(inbox.iterdir())) == 50

    # Run 1 dies after 20 files were recorded in the ledger, before the 20th is archived.
    real_move = job.move_no_overwrite
    moves = {"n": 0}

    def crashing_move(src: Path, dst: Path) -> Path:
        moves["n"] += 1
        if moves["n"] == 20:
            raise Crash("simulated crash between ledger and move")
        return real_move(src, dst)

    monkeypatch.setattr(job, "move_no_overwrite", crashing_move)
    with pytest.raises(Crash):
        ingest_inbox(inbox, root)
    monkeypatch.setattr(job, "move_no_overwrite", real_move)
    first = ledger_of(root)
    assert 0 < len(first) < 50
    _complete_and_redrop(inbox, root, first)
    _check_ledger_and_folders(root, lab)
    _check_dataset(root, lab)


def _complete_and_redrop(inbox: Path, root: Path, first: list[dict]) -> None:
    # Run 2 completes the job.
    second = ingest_inbox(inbox, root)
    assert second.count(Status.resumed) == 1
    assert second.count(Status.duplicate) == 0
    assert not list(inbox.iterdir())

    # Between runs the lab drops the same content again, under other names and the same name.
    archived = sorted((root / "archive").iterdir())
    shutil.copy(archived[0], inbox / "line-9__renamed-copy.csv")
    shutil.copy(archived[1], inbox / "another name.parquet")
    original_name = next(r["name"] for r in first if r["status"] == "ingested")
    sha = next(r["sha256"] for r in first if r["name"] == original_name)
    shutil.copy(root / "archive" / f"{sha}-{safe_name(original_name)}", inbox / original_name)

    # Run 3: three duplicates, nothing appended.
    third = ingest_inbox(inbox, root)
    assert third.counts == {
        "ingested": 0,
        "resumed": 0,
        "duplicate": 3,
        "quarantined": 0,
        "skipped": 0,
    }
    assert not list(inbox.iterdir())


def _check_ledger_and_folders(root: Path, lab: dict) -> None:
    ledger = ledger_of(root)
    ingested = [r for r in ledger if r["status"] == "ingested"]
    assert len(ingested) == 40 and len({r["sha256"] for r in ingested}) == 40
    assert len([r for r in ledger if r["status"] == "duplicate"]) == 3
    parts = list((root / "datasets").rglob("part-*.parquet"))
    assert len(parts) == 40
    assert not list((root / "datasets").rglob(".*"))  # no temporary files left

    # Quarantine: the ten bad files, each with a report naming its problem.
    quarantine = root / "quarantine"
    for name, words in lab["bad"].items():
        report = (quarantine / (safe_name(name) + ".error.txt")).read_text()
        assert words in report, (name, report)
        assert (quarantine / safe_name(name)).exists()
    assert len(list(quarantine.glob("*.error.txt"))) == 10
    assert len([r for r in ledger if r["status"] == "quarantined"]) == 10

    # Archive: 40 originals + 2 renamed duplicates (the same-name copy is byte-identical).
    assert len(list((root / "archive").iterdir())) == 42


def _check_dataset(root: Path, lab: dict) -> None:
    # The dataset equals the valid inputs row for row (read back with pyarrow, hive layout).
    press = ds.dataset(
        root / "datasets" / "study=press", format="parquet", partitioning="hive"
    ).to_table()
    press = press.to_pandas().drop(columns=["source_sha256"])
    expected_press = expected_rows(lab["press"], PRESS_KEY)
    pd.testing.assert_frame_equal(
        sorted_rows(press, PRESS_KEY)[expected_press.columns], expected_press, check_dtype=False
    )
    drive = read_dataset(root, "drive").drop(columns=["source_sha256"])
    expected_drive = expected_rows(lab["drive"], DRIVE_KEY)
    pd.testing.assert_frame_equal(
        sorted_rows(drive, DRIVE_KEY)[expected_drive.columns], expected_drive, check_dtype=False
    )

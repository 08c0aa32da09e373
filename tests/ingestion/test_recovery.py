"""Crash points one at a time, the ledger, the lock, an unexpected reader error."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ingestion import job
from ingestion.errors import IngestBusyError, IngestError
from ingestion.ledger import Ledger, exclusive_lock
from ingestion.results import Status
from ingestion.rules import Study
from ingestion.run import ingest_inbox
from tests.ingestion.helpers import (
    Crash,
    ledger_of,
    one_press_file,
)
from tests.tasks.ingest_data import press_frame, write


def test_part_without_ledger_record_is_recorded_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root, _ = one_press_file(tmp_path)

    def crash(self: Ledger, record: dict) -> None:
        raise Crash("killed before the ledger write")

    with monkeypatch.context() as m:
        m.setattr(Ledger, "append", crash)
        with pytest.raises(Crash):
            ingest_inbox(inbox, root)
    assert len(list((root / "datasets").rglob("part-*.parquet"))) == 1
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1
    assert len(ledger_of(root)) == 1
    assert len(list((root / "datasets").rglob("part-*.parquet"))) == 1


def test_hard_link_made_but_original_not_removed_is_resumed(tmp_path: Path) -> None:
    inbox, root, path = one_press_file(tmp_path)
    calls = []
    real_unlink = os.unlink

    def crash_unlink(p, *a, **k):  # the move's final unlink of the inbox copy
        if Path(p) == path:
            calls.append(p)
            raise Crash("killed between link and unlink")
        return real_unlink(p, *a, **k)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "unlink", crash_unlink)
        with pytest.raises(Crash):
            ingest_inbox(inbox, root)
    assert calls and path.exists()
    report = ingest_inbox(inbox, root)
    assert report.counts["resumed"] == 1 and not path.exists()
    assert len(list((root / "archive").iterdir())) == 1


def test_torn_ledger_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append({"sha256": "a", "name": "x", "status": "ingested"})
    with open(ledger.path, "ab") as handle:
        handle.write(b'{"sha256": "b", "na')
    assert [r["sha256"] for r in ledger.read()] == ["a"]
    ledger.append({"sha256": "c", "name": "y", "status": "ingested"})
    assert [r["sha256"] for r in ledger.read()] == ["a", "c"]
    assert ledger.path.read_text().count("\n") == 2


def test_corrupt_ledger_line_stops_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "ledger.jsonl").write_text('{"sha256": "a"}\nnot json\n{"sha256": "b"}\n')
    with pytest.raises(IngestError, match="line 2 is not valid JSON"):
        Ledger(tmp_path / "ledger.jsonl").read()


def test_second_concurrent_run_is_refused(tmp_path: Path) -> None:
    inbox, root, path = one_press_file(tmp_path)
    with exclusive_lock(root / ".ingest.lock"), pytest.raises(IngestBusyError, match="another"):
        ingest_inbox(inbox, root)
    assert path.exists()


# -- untrusted inbox --------------------------------------------------------------------------


def test_unexpected_reader_error_quarantines_the_file_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root, _ = one_press_file(tmp_path)
    write(inbox, "line-1__b.csv", press_frame(np.random.default_rng(9)))
    real = job.validate

    def flaky(study: Study, frame: pd.DataFrame, *, source: str) -> pd.DataFrame:
        if "b.csv" in source:
            raise TypeError("cannot coerce nested list")
        return real(study, frame, source=source)

    monkeypatch.setattr(job, "validate", flaky)
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1 and report.count(Status.quarantined) == 1
    text = (root / "quarantine" / "line-1__b.csv.error.txt").read_text()
    assert "TypeError: cannot coerce nested list" in text

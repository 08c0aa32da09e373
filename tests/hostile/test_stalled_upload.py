"""Issue 28, item 8 (ingestion): an upload that stalls longer than the settle window is not
ingested half - a file held open for writing by any process is not taken, `.part` files are
never taken, and a file that grew after it was taken is re-ingested whole, replacing the
partial part (real files and processes, seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ingestion import job as job_module
from ingestion.ledger import Ledger
from ingestion.readers import read_dataset
from ingestion.results import Status
from ingestion.run import ingest_inbox
from ingestion.writers import open_for_writing
from tests.tasks.ingest_data import press_frame

SETTLE = 0.2  # seconds: the settle window of these runs (the files are aged past it)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    return inbox, root


def _age(path: Path, seconds: float = 3600) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def _halves(n_series: int = 4) -> tuple[str, str, int]:
    """A press table as CSV cut after half of its series (both halves valid tables) and its
    row count."""
    frame = press_frame(np.random.default_rng(7), n_series=n_series)
    lines = frame.to_csv(index=False).splitlines(keepends=True)
    cut = 1 + len(frame) // 2  # header + the first half of the series (rows series-major)
    return "".join(lines[:cut]), "".join(lines[cut:]), len(frame)


def test_a_writer_stalled_past_the_settle_window_is_not_taken(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    first, rest, rows = _halves()
    path = inbox / "line-1__upload.csv"
    with open(path, "w") as handle:
        handle.write(first)
        handle.flush()
        _age(path)  # stalled: unchanged for far longer than the settle window
        report = ingest_inbox(inbox, root, settle_seconds=SETTLE)
        (outcome,) = report.outcomes
        assert outcome.status is Status.skipped, outcome
        assert "held open for writing by process" in outcome.message
        assert path.exists() and not (root / "datasets").exists()
        handle.write(rest)
    _age(path)
    assert ingest_inbox(inbox, root, settle_seconds=SETTLE).count(Status.ingested) == 1
    assert len(read_dataset(root, "press")) == rows  # whole, once


def test_a_writer_in_another_process_is_seen(tmp_path: Path) -> None:
    inbox, _ = _folders(tmp_path)
    path = inbox / "line-1__upload.csv"
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; f=open(sys.argv[1],'a'); f.write('x');"
         "f.flush(); print('open', flush=True); time.sleep(30)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        assert open_for_writing(inbox) == {path.name: [writer.pid]}
        reader = open(path)  # a reader is no writer
        try:
            assert set(open_for_writing(inbox)[path.name]) == {writer.pid}
        finally:
            reader.close()
    finally:
        writer.kill()
        writer.wait()
    assert open_for_writing(inbox) == {}


def test_part_files_are_never_taken_until_renamed(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    first, rest, rows = _halves()
    part = inbox / "line-1__upload.csv.part"
    part.write_text(first + rest)
    _age(part)
    (outcome,) = ingest_inbox(inbox, root).outcomes
    assert outcome.status is Status.skipped and "upload in progress (.part)" in outcome.message
    part.rename(inbox / "line-1__upload.csv")
    assert ingest_inbox(inbox, root).count(Status.ingested) == 1
    assert len(read_dataset(root, "press")) == rows


def _ingested(root: Path) -> list[dict]:
    return [r for r in Ledger(root / "ledger.jsonl").read() if r["status"] == "ingested"]


def test_a_file_that_grew_after_it_was_taken_replaces_its_partial_part(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    first, rest, rows = _halves()
    path = inbox / "line-1__upload.csv"
    path.write_text(first)  # the writer closed it (stalled, then reconnected later)
    ingest_inbox(inbox, root)
    assert len(read_dataset(root, "press")) == rows // 2 and not path.exists()
    (partial,) = _ingested(root)
    path.write_text(first + rest)  # the complete upload, same name
    (outcome,) = ingest_inbox(inbox, root).outcomes
    assert outcome.status is Status.ingested and "replaces the" in outcome.message
    assert len(read_dataset(root, "press")) == rows  # whole, the partial rows not twice
    assert _ingested(root)[-1]["replaces"] == partial["sha256"]
    assert not (root / partial["part"]).exists()
    assert (root / "withdrawn" / f"{partial['sha256']}-{path.name}").is_file()  # kept
    # a different file under the same name is a new file, not a replacement
    path.write_text(first.replace("\n0,", "\n9,", 1) + rest)
    assert "replaces" not in ingest_inbox(inbox, root).outcomes[0].message


def test_a_file_growing_during_the_run_is_left_for_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root = _folders(tmp_path)
    first, rest, rows = _halves()
    path = inbox / "line-1__upload.csv"
    path.write_text(first)
    real_archive = job_module.Job._archive

    def grow_then_archive(self: job_module.Job, staged: Path, sha: str, name: str) -> Path:
        with open(path, "a") as handle:  # the upload goes on after the file was taken
            handle.write(rest)
        return real_archive(self, staged, sha, name)

    with monkeypatch.context() as patch:
        patch.setattr(job_module.Job, "_archive", grow_then_archive)
        (outcome,) = ingest_inbox(inbox, root).outcomes
    assert "grew meanwhile: left in the inbox" in outcome.message
    assert path.exists() and not (root / "quarantine").exists()
    (outcome,) = ingest_inbox(inbox, root).outcomes
    assert outcome.status is Status.ingested and "replaces the" in outcome.message
    assert len(read_dataset(root, "press")) == rows and not path.exists()

"""An untrusted inbox: links, folders, hostile names, overlaps, uploads in progress."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ingestion.errors import IngestError
from ingestion.results import Status
from ingestion.run import ingest_inbox
from tests.ingestion.helpers import (
    one_press_file,
)
from tests.tasks.ingest_data import press_frame, write


def test_symlinks_folders_and_hidden_files_are_left_alone(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    outside = write(tmp_path, "secret.csv", press_frame(rng))
    (inbox / "link__x.csv").symlink_to(outside)
    (inbox / "sub").mkdir()
    write(inbox / "sub", "nested__x.csv", press_frame(rng))
    write(inbox, ".uploading.csv", press_frame(rng))
    os.mkfifo(inbox / "pipe.csv")
    report = ingest_inbox(inbox, root)
    assert report.counts["skipped"] == 4 and report.count(Status.ingested) == 0
    reasons = {o.name: o.message for o in report.outcomes}
    assert "symbolic link" in reasons["link__x.csv"]
    assert "folder" in reasons["sub"]
    assert outside.exists() and (inbox / "link__x.csv").is_symlink()
    assert (inbox / "sub" / "nested__x.csv").exists() and (inbox / ".uploading.csv").exists()
    assert not (root / "datasets").exists()


def test_hostile_names_stay_inside_the_data_root(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    write(inbox, "evil__~\\..\\..\\x.csv", press_frame(rng))
    write(inbox, "~\\..\\..\\evil__x.csv", press_frame(rng))  # campaign part '~\\..\\..\\evil'
    (inbox / "bad\n\t.csv").write_text("a,b\n1,2\n")
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1 and report.count(Status.quarantined) == 2
    created = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert created == {"inbox", "data"}
    assert [p.name for p in (root / "datasets" / "study=press").iterdir()] == ["campaign=evil"]
    for p in (root / "archive").iterdir():
        assert not p.name.startswith(".") and "\\" not in p.name and "\n" not in p.name
    names = sorted(p.name for p in (root / "quarantine").iterdir())
    assert names == ["__._._evil__x.csv", "__._._evil__x.csv.error.txt", "bad_.csv",
                     "bad_.csv.error.txt"]  # fmt: skip
    assert "invalid campaign" in (root / "quarantine" / names[1]).read_text()


def test_archived_data_is_never_overwritten(tmp_path: Path) -> None:
    inbox, root, path = one_press_file(tmp_path)
    from ingestion.inbox import hash_file

    sha = hash_file(path)[0]
    squatter = root / "archive" / f"{sha}-{path.name}"
    squatter.parent.mkdir(parents=True)
    squatter.write_text("someone else's bytes")
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1
    assert squatter.read_text() == "someone else's bytes"
    assert (root / "archive" / f"{sha}-1-{path.name}").exists()


def test_same_bad_name_twice_gets_two_quarantine_entries(tmp_path: Path) -> None:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    (inbox / "bad?.csv").write_text("a,b\n1,2\n")
    (inbox / "bad*.csv").write_text("a,c\n1,2\n")
    report = ingest_inbox(inbox, root)
    assert report.count(Status.quarantined) == 2
    names = sorted(p.name for p in (root / "quarantine").iterdir())
    assert len(names) == 4 and "bad_.csv" in names and "bad_.csv.error.txt" in names


def test_inbox_must_not_overlap_managed_folders(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "archive").mkdir(parents=True)
    with pytest.raises(IngestError, match="overlaps"):
        ingest_inbox(root / "archive", root)
    with pytest.raises(IngestError, match="not an existing folder"):
        ingest_inbox(tmp_path / "missing", root)


def test_unsettled_files_wait_for_the_next_run(tmp_path: Path) -> None:
    inbox, root, path = one_press_file(tmp_path)
    report = ingest_inbox(inbox, root, settle_seconds=3600)
    assert report.counts["skipped"] == 1 and "waiting" in report.outcomes[0].message
    assert path.exists()


# -- dry run, campaign table, report, tracking ------------------------------------------------


def test_dry_run_writes_and_moves_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    frame = press_frame(rng)
    write(inbox, "line-1__a.csv", frame)
    write(inbox, "line-1__b.csv", frame)  # same bytes: a duplicate even in a dry run
    (inbox / "bad.csv").write_text("a,b\n1,2\n")
    before = sorted(p.name for p in inbox.iterdir())
    report = ingest_inbox(inbox, root, dry_run=True)
    assert report.dry_run
    assert [o.status for o in report.outcomes] == [
        Status.quarantined,
        Status.ingested,
        Status.duplicate,
    ]
    assert sorted(p.name for p in inbox.iterdir()) == before
    assert not root.exists()

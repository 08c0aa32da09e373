"""Ingestion: rules, the 50-file inbox over three runs, crash recovery, untrusted names."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

from schemas.errors import DataError
from tasks import ingest
from tasks.ingest import (
    IngestReport,
    Status,
    Study,
    campaign_of,
    campaign_table,
    classify,
    ingest_inbox,
    read_dataset,
)
from tasks.ingest_files import (
    IngestBusyError,
    IngestError,
    Ledger,
    exclusive_lock,
    safe_name,
)
from tests.tasks.ingest_data import build_inbox, drive_frame, press_frame, write

PRESS_KEY = ["campaign", "series", "step", "sensor", "force_setpoint_N", "force_N"]
DRIVE_KEY = ["campaign", "t_s", "torque_Nm", "velocity_rad_s"]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")


def _ledger(root: Path) -> list[dict]:
    return Ledger(root / "ledger.jsonl").read()


def _expected(entries: list[tuple[str, pd.DataFrame]], key: list[str]) -> pd.DataFrame:
    frames = [frame.assign(campaign=campaign) for campaign, frame in entries]
    return _sorted(pd.concat(frames, ignore_index=True), key)


def _sorted(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    frame = frame.astype({"campaign": str, **({"sensor": str} if "sensor" in frame else {})})
    return frame.sort_values(key, kind="stable").reset_index(drop=True)


# -- rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("columns", "study"),
    [
        (["series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um"], "press"),
        (["series", "step", "force_setpoint_N", "force_N", "sensor"], "press"),  # one missing
        (["t_s", "torque_Nm", "velocity_rad_s"], "drive"),
        (["t_s", "torque_Nm", "velocity_rad_s", "position_rad", "note"], "drive"),
        (["t_s", "torque_Nm"], "drive"),
    ],
)
def test_classify_by_columns(columns: list[str], study: str) -> None:
    assert classify(columns) == Study(study)


@pytest.mark.parametrize(
    ("columns", "words"),
    [
        (["a", "b"], "neither"),
        (["series", "t_s"], "neither"),
        (
            [*ingest.PRESS_COLUMNS, *ingest.DRIVE_COLUMNS],
            "ambiguous",
        ),
    ],
)
def test_classify_rejects_neither_and_both(columns: list[str], words: str) -> None:
    with pytest.raises(DataError, match=words):
        classify(columns, source="x.csv")


@pytest.mark.parametrize(
    ("name", "campaign"),
    [
        ("line-3__2026-05-01_run2.csv", "line-3"),
        ("line-3__a__b.parquet", "line-3"),
        ("Line-3__x.csv", "default"),  # upper case is not a campaign
        ("line_3__x.csv", "default"),
        ("line-3_x.csv", "default"),
        ("__x.csv", "default"),
        ("line-3__.csv", "default"),
        ("../x__y.csv", "default"),
        ("rig__a\nb.csv", "rig"),
    ],
)
def test_campaign_from_name(name: str, campaign: str) -> None:
    assert campaign_of(name) == campaign


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", ".bashrc", "..", "a\nb.csv", "x/../../y.csv", "C:\\win\\f.csv", "", "é"],
)
def test_safe_name_is_a_plain_visible_file_name(name: str) -> None:
    safe = safe_name(name)
    assert safe and "/" not in safe and "\\" not in safe and ".." not in safe
    assert not safe.startswith(".")
    assert all(c.isalnum() or c in "._-" for c in safe)


def test_safe_name_shortens_and_keeps_extension() -> None:
    safe = safe_name("x" * 500 + ".parquet")
    assert len(safe) == 120 and safe.endswith(".parquet")


# -- the 50-file inbox over three runs --------------------------------------------------------


class _Crash(RuntimeError):
    pass


def test_fifty_files_three_runs_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    lab = build_inbox(inbox, rng)
    assert len(list(inbox.iterdir())) == 50

    # Run 1 dies after 20 files were recorded in the ledger, before the 20th is archived.
    real_move = ingest.move_no_overwrite
    moves = {"n": 0}

    def crashing_move(src: Path, dst: Path) -> Path:
        moves["n"] += 1
        if moves["n"] == 20:
            raise _Crash("simulated crash between ledger and move")
        return real_move(src, dst)

    monkeypatch.setattr(ingest, "move_no_overwrite", crashing_move)
    with pytest.raises(_Crash):
        ingest_inbox(inbox, root)
    monkeypatch.setattr(ingest, "move_no_overwrite", real_move)
    first = _ledger(root)
    assert 0 < len(first) < 50

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

    ledger = _ledger(root)
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

    # The dataset equals the valid inputs row for row (read back with pyarrow, hive layout).
    press = ds.dataset(
        root / "datasets" / "study=press", format="parquet", partitioning="hive"
    ).to_table()
    press = press.to_pandas().drop(columns=["source_sha256"])
    expected_press = _expected(lab["press"], PRESS_KEY)
    pd.testing.assert_frame_equal(
        _sorted(press, PRESS_KEY)[expected_press.columns], expected_press, check_dtype=False
    )
    drive = read_dataset(root, "drive").drop(columns=["source_sha256"])
    expected_drive = _expected(lab["drive"], DRIVE_KEY)
    pd.testing.assert_frame_equal(
        _sorted(drive, DRIVE_KEY)[expected_drive.columns], expected_drive, check_dtype=False
    )


# -- crash points, one at a time ---------------------------------------------------------------


def _one_press_file(tmp_path: Path, name: str = "line-1__a.csv") -> tuple[Path, Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    path = write(inbox, name, press_frame(np.random.default_rng(1)))
    return inbox, root, path


def test_part_without_ledger_record_is_recorded_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root, _ = _one_press_file(tmp_path)

    def crash(self: Ledger, record: dict) -> None:
        raise _Crash("killed before the ledger write")

    with monkeypatch.context() as m:
        m.setattr(Ledger, "append", crash)
        with pytest.raises(_Crash):
            ingest_inbox(inbox, root)
    assert len(list((root / "datasets").rglob("part-*.parquet"))) == 1
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1
    assert len(_ledger(root)) == 1
    assert len(list((root / "datasets").rglob("part-*.parquet"))) == 1


def test_hard_link_made_but_original_not_removed_is_resumed(tmp_path: Path) -> None:
    inbox, root, path = _one_press_file(tmp_path)
    calls = []
    real_unlink = os.unlink

    def crash_unlink(p, *a, **k):  # the move's final unlink of the inbox copy
        if Path(p) == path:
            calls.append(p)
            raise _Crash("killed between link and unlink")
        return real_unlink(p, *a, **k)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "unlink", crash_unlink)
        with pytest.raises(_Crash):
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
    inbox, root, path = _one_press_file(tmp_path)
    with exclusive_lock(root / ".ingest.lock"), pytest.raises(IngestBusyError, match="another"):
        ingest_inbox(inbox, root)
    assert path.exists()


# -- untrusted inbox --------------------------------------------------------------------------


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
    write(inbox, "~\\..\\..\\evil__x.csv", press_frame(rng))
    (inbox / "bad\n\t.csv").write_text("a,b\n1,2\n")
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1 and report.count(Status.quarantined) == 1
    created = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert created == {"inbox", "data"}
    for p in (root / "archive").iterdir():
        assert not p.name.startswith(".") and "\\" not in p.name and "\n" not in p.name
    names = sorted(p.name for p in (root / "quarantine").iterdir())
    assert names == ["bad_.csv", "bad_.csv.error.txt"]


def test_archived_data_is_never_overwritten(tmp_path: Path) -> None:
    inbox, root, path = _one_press_file(tmp_path)
    from tasks.ingest_files import hash_file

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
    inbox, root, path = _one_press_file(tmp_path)
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
    inbox, root, _ = _one_press_file(tmp_path)
    (inbox / "bad.csv").write_text("")
    report = ingest_inbox(inbox, root)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["counts"]["ingested"] == 1 and data["counts"]["quarantined"] == 1
    assert data["rows"] == 16
    assert "bad.csv: " in report.summary() and "empty" in report.summary()
    assert isinstance(report, IngestReport)


def test_log_ingestion_to_mlflow(tmp_path: Path) -> None:
    from tasks.tracking import Tracker

    inbox, root, _ = _one_press_file(tmp_path)
    (inbox / "bad.csv").write_text("x\n1\n")
    report = ingest_inbox(inbox, root)
    tracker = Tracker()
    run_id = ingest.log_ingestion(report, "ingest-test", tracker)
    run = tracker.client.get_run(run_id)
    assert run.data.metrics["ingested"] == 1 and run.data.metrics["quarantined"] == 1
    assert run.data.metrics["rows"] == 16
    assert run.data.tags["greylab.study"] == "ingest"
    artifacts = {a.path for a in tracker.client.list_artifacts(run_id, "ingest")}
    assert {"ingest/files.csv", "ingest/rejects.csv", "ingest/report.json"} <= artifacts


# -- SIGKILL in the middle of writing a part (subprocess) -------------------------------------

# Runs the ingestion in a child process whose Parquet writer, on the `kill_at`-th part, writes
# half of the file's bytes to the temporary file, announces it and sleeps: the test then kills
# the child with SIGKILL, exactly "in the middle of a write".
_DRIVER = """
import io, os, sys, time
from pathlib import Path
import pandas as pd

inbox, root, marker, kill_at = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
original = pd.DataFrame.to_parquet
calls = [0]

def half_then_sleep(self, path=None, *args, **kwargs):
    calls[0] += 1
    if calls[0] < kill_at:
        return original(self, path, *args, **kwargs)
    buffer = io.BytesIO()
    original(self, buffer, *args, **kwargs)
    data = buffer.getvalue()
    handle = open(path, "wb") if isinstance(path, (str, os.PathLike)) else path
    handle.write(data[: len(data) // 2])
    handle.flush()
    os.fsync(handle.fileno())
    marker.write_text(str(len(data)))
    time.sleep(300)

pd.DataFrame.to_parquet = half_then_sleep
from tasks.ingest import ingest_inbox
ingest_inbox(inbox, root)
"""


def test_sigkill_mid_write_leaves_dataset_readable_and_next_run_completes(
    tmp_path: Path,
) -> None:
    import signal
    import subprocess
    import sys
    import time

    rng = np.random.default_rng(7)
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    inputs = []
    for i in range(6):
        frame = press_frame(rng)
        write(inbox, f"line-1__f{i}.csv", frame)
        inputs.append(("line-1", frame))
    # The script's folder is on the child's sys.path: not the data root's parent (refused).
    (tmp_path / "driver").mkdir()
    driver, marker = tmp_path / "driver" / "driver.py", tmp_path / "paused"
    driver.write_text(_DRIVER)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "PREFECT_HOME": str(tmp_path / "prefect"),
    }
    child = subprocess.Popen(
        [sys.executable, str(driver), str(inbox), str(root), str(marker), "4"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if child.poll() is not None:
                pytest.fail(f"driver exited early: {child.stdout.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("driver did not reach the write within 120 s")
            time.sleep(0.1)
        temp = list((root / "datasets").rglob(".part-*.tmp"))
        assert len(temp) == 1 and 0 < temp[0].stat().st_size < int(marker.read_text())
        assert read_dataset(root, "press")["source_sha256"].nunique() == 3  # readable meanwhile
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    # Killed: three parts complete, the fourth half-written under a hidden temp name.
    readable = read_dataset(root, "press")
    assert readable["source_sha256"].nunique() == 3
    assert len([r for r in _ledger(root) if r["status"] == "ingested"]) == 3
    assert len(list(inbox.iterdir())) == 3

    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 3
    assert not list(inbox.iterdir())
    assert not list((root / "datasets").rglob(".*"))
    assert len([r for r in _ledger(root) if r["status"] == "ingested"]) == 6
    got = read_dataset(root, "press").drop(columns=["source_sha256"])
    expected = _expected(inputs, PRESS_KEY)
    pd.testing.assert_frame_equal(
        _sorted(got, PRESS_KEY)[expected.columns], expected, check_dtype=False
    )


def test_unexpected_reader_error_quarantines_the_file_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root, _ = _one_press_file(tmp_path)
    write(inbox, "line-1__b.csv", press_frame(np.random.default_rng(9)))
    real = ingest.validate

    def flaky(study: Study, frame: pd.DataFrame, *, source: str) -> pd.DataFrame:
        if "b.csv" in source:
            raise TypeError("cannot coerce nested list")
        return real(study, frame, source=source)

    monkeypatch.setattr(ingest, "validate", flaky)
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1 and report.count(Status.quarantined) == 1
    text = (root / "quarantine" / "line-1__b.csv.error.txt").read_text()
    assert "TypeError: cannot coerce nested list" in text


def test_numeric_looking_campaigns_read_back_as_names(tmp_path: Path) -> None:
    inbox, root, _ = _one_press_file(tmp_path, name="007__a.csv")
    ingest_inbox(inbox, root)
    assert set(read_dataset(root, "press")["campaign"]) == {"007"}

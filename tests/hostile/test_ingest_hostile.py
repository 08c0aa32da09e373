"""Issue 10, ingestion: every reproduction kept as a regression test (real files, seconds)."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from ingestion import job
from ingestion.errors import IngestBusyError, IngestError
from ingestion.ledger import Ledger, exclusive_lock
from schemas.lab_files import FileLimits
from tasks.ingest import tasks as ingest
from tasks.ingest.tasks import Status, ingest_inbox, read_dataset
from tests.tasks.ingest_data import press_frame, write

SETTLE = 0.3  # seconds: long enough to see a writer, short enough for a fast suite


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}")


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    return inbox, root


def _ingested(root: Path) -> list[dict]:
    return [r for r in Ledger(root / "ledger.jsonl").read() if r["status"] == "ingested"]


def _age(path: Path, seconds: float = 3600) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def _csv_halves(frame: pd.DataFrame) -> tuple[str, str]:
    text = frame.to_csv(index=False)
    lines = text.splitlines(keepends=True)
    cut = len(lines) // 2
    return "".join(lines[:cut]), "".join(lines[cut:])


def test_half_written_file_is_taken_only_when_complete(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    frame = press_frame(np.random.default_rng(1), n_series=4)
    first, second = _csv_halves(frame)
    path = inbox / "line-1__upload.csv"
    with open(path, "w") as handle:
        handle.write(first)
        handle.flush()
        report = ingest_inbox(inbox, root, settle_seconds=SETTLE)  # still being written
        assert report.count(Status.skipped) == 1 and "waiting" in report.outcomes[0].message
        handle.write(second)
    time.sleep(SETTLE + 0.05)
    report = ingest_inbox(inbox, root, settle_seconds=SETTLE)
    assert report.count(Status.ingested) == 1 and not path.exists()
    stored = read_dataset(root, "press")
    assert len(stored) == len(frame)  # all rows, exactly once
    (record,) = _ingested(root)
    archived = root / "archive" / f"{record['sha256']}-{path.name}"
    from ingestion.inbox import hash_file

    assert hash_file(archived)[0] == record["sha256"]  # the ledger hash is the stored bytes'


def test_writer_resuming_during_the_settle_window_is_not_taken(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    frame = press_frame(np.random.default_rng(2), n_series=4)
    first, second = _csv_halves(frame)
    path = inbox / "line-1__paused.csv"
    path.write_text(first)
    _age(path)  # the upload paused for an hour: old mtime, but not finished

    def writer_resumes(seconds: float) -> None:
        with open(path, "a") as handle:
            handle.write(second)
        time.sleep(seconds)

    report = ingest_inbox(inbox, root, settle_seconds=SETTLE, wait=writer_resumes)
    assert report.count(Status.ingested) == 0 and "changed" in report.outcomes[0].message
    assert not (root / "datasets").exists() and path.exists()
    _age(path)
    report = ingest_inbox(inbox, root, settle_seconds=SETTLE)
    assert report.count(Status.ingested) == 1
    assert len(read_dataset(root, "press")) == len(frame)


def test_vanishing_file_is_reported_and_skipped(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    path = write(inbox, "line-1__gone.csv", press_frame(np.random.default_rng(3)))
    keep = write(inbox, "line-1__kept.csv", press_frame(np.random.default_rng(4)))
    _age(path), _age(keep)

    def user_deletes(seconds: float) -> None:
        path.unlink()

    report = ingest_inbox(inbox, root, settle_seconds=SETTLE, wait=user_deletes)
    outcomes = {o.name: o for o in report.outcomes}
    assert outcomes[path.name].status is Status.skipped
    assert "vanished" in outcomes[path.name].message
    assert outcomes[keep.name].status is Status.ingested
    assert [r["name"] for r in _ingested(root)] == [keep.name]


def test_file_deleted_between_validation_and_archiving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root = _folders(tmp_path)
    path = write(inbox, "line-1__a.csv", press_frame(np.random.default_rng(5)))
    other = write(inbox, "line-1__b.csv", press_frame(np.random.default_rng(6)))
    real = job.validate

    def validate_then_delete(study, frame, *, source):  # the deletion is real, only timed
        result = real(study, frame, source=source)
        if source == path.name:
            path.unlink()
        return result

    monkeypatch.setattr(job, "validate", validate_then_delete)
    report = ingest_inbox(inbox, root)  # the run is not aborted
    assert report.count(Status.ingested) == 2 and not other.exists()
    for record in _ingested(root):  # every "ingested" has its archived original
        assert (root / "archive" / f"{record['sha256']}-{record['name']}").exists()


def test_huge_parquet_is_refused_by_its_metadata_and_leaves_the_inbox(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    n = 200_000  # constant columns: a small file holding many rows
    huge = pd.DataFrame(
        {"series": np.zeros(n, int), "step": np.zeros(n, int), "force_setpoint_N": 1.0,
         "force_N": 1.0, "sensor": "s1", "displacement_um": 0.0}
    )  # fmt: skip
    write(inbox, "line-1__huge.parquet", huge)
    big_csv = write(inbox, "line-1__big.csv", press_frame(np.random.default_rng(7), n_series=40))
    assert (inbox / "line-1__huge.parquet").stat().st_size < big_csv.stat().st_size
    limits = FileLimits(max_rows=10_000, max_bytes=big_csv.stat().st_size - 1)
    report = ingest_inbox(inbox, root, limits=limits)
    messages = {o.name: o.message for o in report.outcomes}
    assert report.count(Status.quarantined) == 2 and not list(inbox.iterdir())
    assert "200000 rows" in messages["line-1__huge.parquet"]
    assert "GREYLAB_MAX_FILE_ROWS" in messages["line-1__huge.parquet"]
    assert "GREYLAB_MAX_FILE_BYTES" in messages["line-1__big.csv"]
    assert (root / "quarantine" / "line-1__huge.parquet.error.txt").exists()


def test_csv_above_the_row_limit_is_refused(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    write(inbox, "line-1__long.csv", press_frame(np.random.default_rng(8), n_series=10))
    report = ingest_inbox(inbox, root, limits=FileLimits(max_rows=50))
    assert report.count(Status.quarantined) == 1
    assert "more than 50 rows" in report.outcomes[0].message


def test_markup_in_names_headers_and_sensors_does_not_crash_the_output(tmp_path: Path) -> None:
    from flows.ingest.cli import print_ingest_result

    inbox, root = _folders(tmp_path)
    frame = press_frame(np.random.default_rng(9))
    frame.loc[frame["sensor"] == "s1", "sensor"] = "[/x]"
    write(inbox, "[red]x[bold]__[i]a.csv", frame.rename(columns={"displacement_um": "[/x]"}))
    write(inbox, "line-1__b.csv", frame)
    report = ingest_inbox(inbox, root)
    assert report.count(Status.quarantined) == 1 and report.count(Status.ingested) == 1
    for markup in (True, False):  # our own console and the CLI's markup-free one
        out = io.StringIO()
        console = Console(file=out, width=200, markup=markup)
        print_ingest_result({**report.to_dict(), "tracking": {}}, console)
        text = out.getvalue()
        assert "[red]x[bold]__[i]a.csv" in text and "'[/x]'" in text and "\\[" not in text


def test_non_integer_series_and_steps_are_rejected_with_the_row(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    frame = press_frame(np.random.default_rng(10)).astype({"step": float, "series": float})
    frame.loc[3, "step"] = 0.5
    frame.loc[6, "series"] = 1.5
    write(inbox, "line-1__fraction.csv", frame)
    report = ingest_inbox(inbox, root)
    assert report.count(Status.quarantined) == 1 and not (root / "datasets").exists()
    message = report.outcomes[0].message
    assert "column 'step' at row 3" in message and "0.5" in message
    assert "column 'series' at row 6" in message and "1.5" in message


def test_formula_prefixed_names_are_neutralised_in_csv_artifacts(tmp_path: Path) -> None:
    from tracking.mlflow_tracker import Tracker

    inbox, root = _folders(tmp_path)
    names = ["=cmd|' -C calc'!A0.csv", "+x.csv", "-y.csv", "@z.csv"]
    for i, name in enumerate(names):
        write(inbox, name, press_frame(np.random.default_rng(20 + i)))
    (inbox / "=bad.csv").write_text("a,b\n1,2\n")
    report = ingest_inbox(inbox, root)
    tracker = Tracker()
    run_id = ingest.log_ingestion(report, "ingest-hostile", tracker)
    local = Path(tracker.client.download_artifacts(run_id, "ingest", str(tmp_path / "dl")))
    for artifact in ("files.csv", "rejects.csv"):
        for line in (local / artifact).read_text().splitlines()[1:]:
            assert not line.startswith(("=", "+", "-", "@", "\t", "\r")), line
    assert "'=cmd" in (local / "files.csv").read_text()


def test_two_data_roots_sharing_one_inbox(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for i in range(6):
        write(inbox, f"line-1__f{i}.csv", press_frame(np.random.default_rng(30 + i)))
    with exclusive_lock(inbox), pytest.raises(IngestBusyError, match="another ingestion"):
        ingest_inbox(inbox, tmp_path / "a")
    errors: list[BaseException] = []

    def run(root: Path) -> None:
        try:
            ingest_inbox(inbox, root)
        except IngestBusyError:
            pass  # a clear "try again" is fine; a crash is not
        except BaseException as exc:  # pragma: no cover - the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(tmp_path / r,)) for r in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for root in ("a", "b"):  # the loser, or a later run, finds nothing left
        run(tmp_path / root)
    assert not errors and not list(inbox.iterdir())
    shas = [r["sha256"] for root in ("a", "b") for r in _ingested(tmp_path / root)]
    assert len(shas) == 6 and len(set(shas)) == 6  # every file exactly once


def test_non_data_files_are_left_alone(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    for name in ("Makefile", "README.md", "pyproject.toml", "evil.py", "notes.txt"):
        (inbox / name).write_text("print('x')\n")
    write(inbox, "line-1__a.csv", press_frame(np.random.default_rng(40)))
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1 and report.count(Status.skipped) == 5
    assert sorted(p.name for p in inbox.iterdir()) == sorted(
        ["Makefile", "README.md", "pyproject.toml", "evil.py", "notes.txt"]
    )
    assert all("left in place" in o.message for o in report.outcomes if o.status is Status.skipped)


def test_folders_on_the_import_path_are_refused(tmp_path: Path) -> None:
    from ingestion.staging import PROJECT_DIR

    inbox, _ = _folders(tmp_path)
    for inbox_, root in ((PROJECT_DIR, tmp_path / "d"), (inbox, PROJECT_DIR / "labdata")):
        with pytest.raises(IngestError, match="import path"):
            ingest_inbox(inbox_, root)
    assert not (PROJECT_DIR / "labdata").exists()
    ingest_inbox(inbox, PROJECT_DIR / ".greylab-test-data", dry_run=True)  # hidden: allowed


def test_mlflow_unreachable_after_storing_says_what_was_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.ingest import flow as ingest_flow

    inbox, root = _folders(tmp_path)
    write(inbox, "line-1__a.csv", press_frame(np.random.default_rng(50)))
    report = ingest_inbox(inbox, root)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    monkeypatch.setattr(ingest, "log_ingestion_task", ingest.log_ingestion)  # no Prefect here
    tracking = ingest_flow.track_report(report, ingest_flow.IngestSettings())
    assert tracking["run_id"] is None and tracking["error"]
    assert "not tracked" in tracking["message"] and "16 rows" in tracking["message"]
    out = io.StringIO()
    from flows.ingest.cli import print_ingest_result

    print_ingest_result({**report.to_dict(), "tracking": tracking}, Console(file=out, width=300))
    assert "stored: 16 rows" in out.getvalue() and "not tracked" in out.getvalue()


# -- issue 17: the campaign file is untrusted; a bad one refuses studies, never data ----------

ENTRY = b'[line-1]\nstudy = "press"\n'
HOSTILE_CAMPAIGN_FILES = {
    "bad TOML": (b'[line-1\nstudy = "press"\n', "not valid TOML"),
    "huge": (ENTRY + b"# padding\n" * 100_000, "larger than 65536 bytes"),
    "nesting bomb": (b"x = " + b"[" * 30_000 + b"]" * 30_000, "line 1 has 60004 characters"),
    "deep arrays": (b"x = " + b"[" * 498 + b"]" * 498, "values nested too deeply"),
    "nesting": (ENTRY + b"tests = " + b"[" * 400 + b"]" * 400, "key 'tests': values nested"),
    "not UTF-8": (b'[line-1]\nstudy = "\xff\xfe"\n', "not UTF-8 text"),
    "unknown key": (ENTRY + b'modelz = ["M1"]\n', "campaign 'line-1', key 'modelz': unknown key"),
    "model not allowed": (ENTRY + b'models = ["os:system"]\n', "key 'models': model 'os:system'"),
    "sheet outside": (
        ENTRY + b'sensor_sheet = "../../etc/passwd"\n',
        "key 'sensor_sheet': '../../etc/passwd' is outside the data root",
    ),
    "unknown study": (b'[line-1]\nstudy = "rm -rf /"\n', "key 'study': unknown study kind"),
    "bad campaign": (b'[Line_1]\nstudy = "press"\n', "campaign 'Line_1': not a campaign name"),
}


def _refused_after_ingesting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Ingest a press file of campaign line-1, then trigger its study: returns the studies."""
    import flows.press.flow
    from flows.campaign_studies import start_studies

    def no_study(study: object) -> None:
        raise AssertionError(f"no study may start from a bad campaign file: {study}")

    monkeypatch.setattr(flows.press.flow, "run_press_study", no_study)
    inbox, root = _folders(tmp_path)
    frame = press_frame(np.random.default_rng(60))
    write(inbox, "line-1__a.csv", frame)
    config = root / "campaigns.toml"
    before = config.read_bytes() if config.is_file() and not config.is_symlink() else b""
    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 1 and len(read_dataset(root, "press")) == len(frame)
    studies = start_studies(report, root)
    assert len(read_dataset(root, "press")) == len(frame) and len(_ingested(root)) == 1
    if before:
        assert config.read_bytes() == before  # read, never changed
    return studies


@pytest.mark.parametrize("case", sorted(HOSTILE_CAMPAIGN_FILES))
def test_hostile_campaign_file_refuses_the_study_and_keeps_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    from models import registry

    monkeypatch.delenv(registry.ALLOWED_ENV, raising=False)
    content, words = HOSTILE_CAMPAIGN_FILES[case]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "campaigns.toml").write_bytes(content)
    (study,) = _refused_after_ingesting(tmp_path, monkeypatch)
    reason = study["reason"]
    assert study["status"] == "refused" and study["campaign"] == "line-1"
    assert reason.startswith(str(tmp_path / "data" / "campaigns.toml")), reason
    assert words in reason and "no study started (the data is stored)" in reason, reason
    assert len(reason) < 1000


@pytest.mark.parametrize("kind", ["link", "pipe"])
def test_campaign_file_that_is_a_link_or_a_pipe_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    config = tmp_path / "data" / "campaigns.toml"
    config.parent.mkdir()
    if kind == "link":
        os.symlink("/etc/passwd", config)
    else:
        os.mkfifo(config)  # a plain open() would block the flow
    (study,) = _refused_after_ingesting(tmp_path, monkeypatch)
    words = "a symbolic link, not followed" if kind == "link" else "not a regular file"
    assert study["status"] == "refused" and words in study["reason"]

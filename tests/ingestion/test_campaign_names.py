"""Issue 17: a file name meant to name a campaign (`something__rest`) with an invalid campaign
part is quarantined with the reason (file, campaign part, rule), never filed under `default`;
names without `__` still go to `default`. Idempotent and dry-run safe like every reject."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ingestion.readers import read_dataset
from ingestion.results import Status
from ingestion.run import ingest_inbox
from tests.ingestion.helpers import ledger_of
from tests.tasks.ingest_data import press_frame, write

BAD_NAMES = ["Line_1__run.csv", "line.2__run.csv", "__run.parquet", "x" * 65 + "__run.csv"]


def _inbox(tmp_path: Path) -> tuple[Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    return inbox, root


def test_invalid_campaign_names_are_quarantined_with_the_rule(tmp_path: Path) -> None:
    inbox, root = _inbox(tmp_path)
    rng = np.random.default_rng(1)
    for name in BAD_NAMES:
        write(inbox, name, press_frame(rng))
    write(inbox, "Run 01 (copy).csv", press_frame(rng))  # no `__`: campaign default
    write(inbox, "line-1__ok.csv", press_frame(rng))
    report = ingest_inbox(inbox, root)

    outcomes = {o.name: o for o in report.outcomes}
    assert report.count(Status.quarantined) == len(BAD_NAMES)
    for name in BAD_NAMES:
        outcome = outcomes[name]
        part = name.rsplit(".", 1)[0].split("__")[0]
        assert outcome.status is Status.quarantined and outcome.campaign is None
        assert outcome.message.startswith(f"{name}: invalid campaign {part!r}")
        assert "[a-z0-9-]{1,64}" in outcome.message
        report_text = (root / outcome.target).with_name(Path(outcome.target).name + ".error.txt")
        assert "[a-z0-9-]{1,64}" in report_text.read_text()
    assert "'L' (upper case)" in outcomes["Line_1__run.csv"].message
    assert "'line-1__...'" in outcomes["Line_1__run.csv"].message  # a suggested fix
    assert "empty" in outcomes["__run.parquet"].message
    assert "65 characters" in outcomes["x" * 65 + "__run.csv"].message
    assert outcomes["Run 01 (copy).csv"].campaign == "default"
    stored = read_dataset(root, "press")
    assert sorted(stored["campaign"].unique()) == ["default", "line-1"]
    assert len(stored) == 2 * len(press_frame(rng))  # nothing of the bad names was stored
    quarantined = [r for r in ledger_of(root) if r["status"] == "quarantined"]
    assert sorted(r["name"] for r in quarantined) == sorted(BAD_NAMES)
    assert all("invalid campaign" in r["error"] for r in quarantined)
    assert not list(inbox.iterdir())


def test_renamed_file_is_ingested_after_quarantine_and_reruns_change_nothing(
    tmp_path: Path,
) -> None:
    inbox, root = _inbox(tmp_path)
    frame = press_frame(np.random.default_rng(2))
    write(inbox, "Line-1__run.csv", frame)
    assert ingest_inbox(inbox, root).count(Status.quarantined) == 1
    before = ledger_of(root)
    assert ingest_inbox(inbox, root).outcomes == ()  # nothing left: idempotent
    assert ledger_of(root) == before
    # the lab renames the quarantined file as the message says and drops it in again
    quarantined = root / "quarantine" / "Line-1__run.csv"
    (inbox / "line-1__run.csv").write_bytes(quarantined.read_bytes())
    report = ingest_inbox(inbox, root)
    assert [(o.status, o.campaign) for o in report.outcomes] == [(Status.ingested, "line-1")]
    assert len(read_dataset(root, "press")) == len(frame)


def test_bad_content_and_bad_name_are_both_reported(tmp_path: Path) -> None:
    inbox, root = _inbox(tmp_path)
    (inbox / "Rig__x.csv").write_text("a,b\n1,2\n")
    (outcome,) = ingest_inbox(inbox, root).outcomes
    assert outcome.status is Status.quarantined
    first, second = outcome.message.splitlines()[:2]
    assert "neither a press measurement table" in first and "invalid campaign 'Rig'" in second


def test_dry_run_reports_the_quarantine_and_moves_nothing(tmp_path: Path) -> None:
    inbox, root = _inbox(tmp_path)
    write(inbox, "Line-1__run.csv", press_frame(np.random.default_rng(3)))
    report = ingest_inbox(inbox, root, dry_run=True)
    assert report.count(Status.quarantined) == 1
    assert "invalid campaign" in report.outcomes[0].message
    assert [p.name for p in inbox.iterdir()] == ["Line-1__run.csv"] and not root.exists()


def test_campaign_filter_leaves_invalid_names_in_place_with_the_reason(tmp_path: Path) -> None:
    inbox, root = _inbox(tmp_path)
    rng = np.random.default_rng(4)
    write(inbox, "Line-1__run.csv", press_frame(rng))
    write(inbox, "line-1__run.csv", press_frame(rng))
    report = ingest_inbox(inbox, root, campaign="line-1")
    outcomes = {o.name: o for o in report.outcomes}
    assert outcomes["line-1__run.csv"].status is Status.ingested
    skipped = outcomes["Line-1__run.csv"]
    assert skipped.status is Status.skipped and "invalid campaign 'Line-1'" in skipped.message
    assert "not campaign 'line-1': left in place" in skipped.message
    assert [p.name for p in inbox.iterdir()] == ["Line-1__run.csv"]

"""Issue 28, items 6 and 7: one file cannot break a campaign for good, a withdrawn file is out
of the ledger, the dataset and the archive, and a campaigns.toml section cannot claim another
campaign's name (real files, no Prefect run, seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.campaign_studies import start_study
from flows.cli import main
from ingestion import withdraw as withdraw_module
from ingestion.campaigns import read_campaign_file
from ingestion.errors import IngestError
from ingestion.job import Job
from ingestion.ledger import Ledger
from ingestion.readers import campaign_table, read_dataset
from ingestion.results import Status
from ingestion.rules import Study
from ingestion.run import ingest_inbox
from ingestion.withdraw import withdraw
from tests.tasks.ingest_data import press_frame, write


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    return inbox, root


def _with_sensor(frame: pd.DataFrame, sensor: str) -> pd.DataFrame:
    """The same table with one more sensor (a valid lab table of another sensor set)."""
    extra = frame[frame["sensor"] == "s1"].assign(sensor=sensor)
    return pd.concat([frame, extra], ignore_index=True)


def _ledger(root: Path) -> list[dict]:
    return Ledger(root / "ledger.jsonl").read()


def test_a_file_with_another_sensor_set_is_quarantined_naming_the_difference(
    tmp_path: Path,
) -> None:
    inbox, root = _folders(tmp_path)
    rng = np.random.default_rng(1)
    write(inbox, "line-1__a.csv", press_frame(rng))
    assert ingest_inbox(inbox, root).count(Status.ingested) == 1
    before = campaign_table(root, "press", "line-1")
    write(inbox, "line-1__b.csv", _with_sensor(press_frame(rng), "s9"))
    report = ingest_inbox(inbox, root)
    (outcome,) = report.outcomes
    assert outcome.status is Status.quarantined, outcome
    assert "does not fit campaign 'line-1'" in outcome.message
    assert "not in the campaign ['s9']" in outcome.message and "line-1__a.csv" in outcome.message
    error = (root / str(outcome.target)).with_name(Path(str(outcome.target)).name + ".error.txt")
    assert "['s9']" in error.read_text()
    # nothing stored is lost, and the campaign still gives one table for its studies
    pd.testing.assert_frame_equal(campaign_table(root, "press", "line-1"), before)
    # the same file under a new campaign's name is ingested: a new sensor set, a new campaign
    write(inbox, "line-1b__b.csv", _with_sensor(press_frame(rng), "s9"))
    assert ingest_inbox(inbox, root).count(Status.ingested) == 1


def test_a_file_with_other_steps_is_quarantined(tmp_path: Path) -> None:
    inbox, root = _folders(tmp_path)
    rng = np.random.default_rng(2)
    write(inbox, "line-1__a.csv", press_frame(rng, n_steps=4))
    write(inbox, "line-1__b.csv", press_frame(rng, n_steps=6))  # same run: checked too
    report = ingest_inbox(inbox, root)
    assert [o.status for o in report.outcomes] == [Status.ingested, Status.quarantined]
    assert "missing" not in report.outcomes[1].message.split("steps")[0]
    assert "not in the campaign [4, 5]" in report.outcomes[1].message
    assert len(campaign_table(root, "press", "line-1")) == len(press_frame(rng, n_steps=4))


def _broken_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    """A campaign broken as before issue 28 (the shape check bypassed): two files with
    different sensor sets; returns (inbox, root, sha of the second)."""
    inbox, root = _folders(tmp_path)
    rng = np.random.default_rng(3)
    write(inbox, "line-1__a.csv", press_frame(rng))
    ingest_inbox(inbox, root)
    write(inbox, "line-1__b.csv", _with_sensor(press_frame(rng), "s9"))
    with monkeypatch.context() as patch:
        patch.setattr(Job, "_misfit", lambda *args: None)
        (outcome,) = ingest_inbox(inbox, root).outcomes
    assert outcome.status is Status.ingested
    with pytest.raises(Exception, match="every series must have every step and sensor"):
        campaign_table(root, "press", "line-1")
    return inbox, root, str(outcome.sha256)


def test_withdraw_takes_the_file_out_and_the_campaign_works_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inbox, root, sha = _broken_campaign(tmp_path, monkeypatch)
    part = next(r["part"] for r in _ledger(root) if r["sha256"] == sha)
    rows = len(read_dataset(root, "press"))
    capsys.readouterr()
    assert main(["ingest", "withdraw", sha[:12], "--data-root", str(root), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "withdrawn" and result["sha256"] == sha
    assert result["moved"] == [f"withdrawn/{sha}-line-1__b.csv"]
    assert not (root / part).exists() and (root / result["moved"][0]).is_file()
    assert not list((root / "archive").glob(f"{sha}-*"))
    assert _ledger(root)[-1]["status"] == "withdrawn"
    table = campaign_table(root, "press", "line-1")  # what --trigger-studies builds
    assert sorted(table["sensor"].unique()) == ["s1", "s2"]
    assert len(read_dataset(root, "press")) == rows - result["rows"] == len(table)
    # again: harmless, nothing changes
    records = len(_ledger(root))
    assert main(["ingest", "withdraw", sha, "--data-root", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "already withdrawn"
    assert len(_ledger(root)) == records
    # the withdrawn content, fixed or not, can come back: here the same bytes under a new
    # campaign's name are ingested again (not "duplicate")
    (root / result["moved"][0]).rename(inbox / "line-2__b.csv")
    (outcome,) = ingest_inbox(inbox, root).outcomes
    assert outcome.status is Status.ingested and outcome.sha256 == sha


def test_withdraw_by_name_or_file_and_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, root, sha = _broken_campaign(tmp_path, monkeypatch)
    copy = tmp_path / "my-copy.csv"
    (root / "archive" / f"{sha}-line-1__b.csv").rename(copy)  # a copy the user kept
    records = _ledger(root)
    for unknown in ("deadbeefdeadbeef", "nothing-here.csv", "abc"):
        assert main(["ingest", "withdraw", unknown, "--data-root", str(root)]) == 2
        err = capsys.readouterr().err
        assert "not an ingested file of" in err and "Traceback" not in err, err
    assert _ledger(root) == records  # nothing changed
    assert main(["ingest", "withdraw", str(copy), "--data-root", str(root)]) == 0
    assert _ledger(root)[-1] == {**_ledger(root)[-1], "sha256": sha, "status": "withdrawn"}
    assert main(["ingest", "withdraw", "line-1__a.csv", "--data-root", str(root)]) == 0
    assert "rows taken out of press/line-1" in capsys.readouterr().out
    with pytest.raises(IngestError, match=r"has no ledger\.jsonl"):
        withdraw(tmp_path / "elsewhere", sha)


def test_a_withdrawal_killed_after_its_ledger_record_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox, root, sha = _broken_campaign(tmp_path, monkeypatch)

    def killed(*args: object) -> list[str]:
        raise KeyboardInterrupt  # killed between the ledger record and the part's removal

    with monkeypatch.context() as patch:
        patch.setattr(withdraw_module, "take_out", killed)
        with pytest.raises(KeyboardInterrupt):
            withdraw(root, sha)
    assert len(list((root / "datasets").rglob(f"part-{sha}.parquet"))) == 1
    assert len(campaign_table(root, "press", "line-1")) > 0  # the ledger is the commit point
    ingest_inbox(inbox, root)  # next run: leftovers taken out
    assert not list((root / "datasets").rglob(f"part-{sha}.parquet"))
    assert (root / "withdrawn" / f"{sha}-line-1__b.csv").is_file()


def test_a_section_cannot_claim_another_campaigns_name(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "campaigns.toml").write_text(
        '[emps]\nstudy = "drive"\n\n[rig-2]\nstudy = "drive"\ncampaign = "emps"\n'
    )
    config = read_campaign_file(root)
    (study,) = start_study(Study.drive, "rig-2", root, config, ["datasets/x.parquet"])
    assert study["status"] == "refused", study
    assert "campaign 'rig-2', key 'campaign'" in study["reason"]
    assert "'emps' is not this section's campaign" in study["reason"]
    assert "data" not in study and "run_id" not in study  # nothing started


def test_withdraw_touches_nothing_outside_the_dataset_whatever_the_ledger_says(
    tmp_path: Path,
) -> None:
    """The ledger is a file in the data root: a forged record's `part` pointing out of
    `datasets/` (or a hash with glob or path characters) never deletes anything there."""
    inbox, root = _folders(tmp_path)
    write(inbox, "line-1__a.csv", press_frame(np.random.default_rng(5)))
    ingest_inbox(inbox, root)
    sha = "ab" * 32
    victim = tmp_path / "outside" / f"part-{sha}.parquet"
    victim.parent.mkdir()
    victim.write_text("precious")
    forged = {"sha256": sha, "name": "x.csv", "study": "press", "campaign": "line-1", "rows": 1,
              "status": "ingested", "part": f"../outside/part-{sha}.parquet"}  # fmt: skip
    Ledger(root / "ledger.jsonl").append(forged)
    Ledger(root / "ledger.jsonl").append({**forged, "sha256": "../../outside/*", "name": "y"})
    assert withdraw(root, sha).status == "withdrawn"
    assert victim.read_text() == "precious"
    with pytest.raises(IngestError, match="not an ingested file"):
        withdraw(root, "../../outside/*")
    ingest_inbox(inbox, root)  # the next run's clean-up neither
    assert victim.read_text() == "precious"


def test_after_a_withdrawal_the_campaigns_study_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What --trigger-studies does for the campaign (the press study itself replaced by a
    recorder, the table task run as its plain function: no Prefect engine needed)."""
    from types import SimpleNamespace

    import flows.press.flow
    from tasks.ingest import tasks as ingest_tasks

    _, root, sha = _broken_campaign(tmp_path, monkeypatch)
    monkeypatch.setattr(ingest_tasks, "campaign_table_task", ingest_tasks.campaign_table_task.fn)
    seen: list = []
    monkeypatch.setattr(flows.press.flow, "run_press_study",
                        lambda s: seen.append(s) or SimpleNamespace(parent_run_id="r"))  # fmt: skip
    (failed,) = start_study(Study.press, "line-1", root, None, [])
    assert failed["status"] == "failed" and "every series must have every step" in failed["reason"]
    withdraw(root, sha)
    (done,) = start_study(Study.press, "line-1", root, None, [])
    assert done["status"] == "done" and len(seen) == 1, done
    assert sorted(pd.read_parquet(done["data"])["sensor"].unique()) == ["s1", "s2"]

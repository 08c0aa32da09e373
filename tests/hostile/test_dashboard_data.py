"""Issue 28, item 8 (dashboard data): a flow's `data` / `sensor_sheet` / `validation_data` name
ingested data by reference (`campaign:NAME[@HASH]`) or files inside the folders the worker
allows - never any file the worker can read (flows/data_refs.py). The validators below are
what Prefect runs on the worker for a dashboard run's parameters."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from flows.cli_settings import settings_from_cli
from flows.data_refs import FILES_ENV, ROOTS_ENV
from flows.drive.settings import DriveSearch
from flows.press.settings import PressStudy
from ingestion.readers import campaign_table
from ingestion.run import ingest_inbox
from tests.tasks.ingest_data import drive_frame, press_frame, write


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A worker's data root with press campaign `line-1` (two files) and drive campaign `rig`;
    no extra allowed folders (the test suite's default allows every folder)."""
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GREYLAB_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    monkeypatch.setenv(FILES_ENV, "")  # restored (unset) after the test
    inbox = tmp_path / "data" / "inbox"
    inbox.mkdir(parents=True)
    rng = np.random.default_rng(4)
    write(inbox, "line-1__a.csv", press_frame(rng))
    write(inbox, "line-1__b.csv", press_frame(rng, n_series=3))
    write(inbox, "rig__r1.csv", drive_frame(rng))
    assert ingest_inbox(inbox, tmp_path / "data").counts["ingested"] == 3
    return tmp_path / "data"


def _refused(model: type, **values: str) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(values)
    return str(info.value)


@pytest.mark.parametrize(
    ("model", "field"),
    [(PressStudy, "data"), (PressStudy, "sensor_sheet"), (DriveSearch, "data"),
     (DriveSearch, "validation_data")],
)  # fmt: skip
def test_files_outside_the_allowed_folders_are_refused(
    root: Path, tmp_path: Path, model: type, field: str
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("series,step\n")
    (root / "link.csv").symlink_to(secret)  # inside the data root, pointing out of it
    for value in ("/etc/passwd", str(secret), str(root / ".." / "secret.csv"),
                  str(root / "link.csv")):  # fmt: skip
        message = _refused(model, **{field: value})
        assert field in message and "is outside the folders this worker reads data from" in message
    if field != "sensor_sheet":  # the message offers the ingested data instead
        assert "campaign:" in _refused(model, **{field: "/etc/passwd"})


def test_files_inside_the_data_root_or_an_allowed_folder_are_taken(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = root / "sheets" / "line-1.csv"
    inside.parent.mkdir()
    inside.write_text("sensor,sigma_um\ns1,0.1\ns2,0.1\n")
    assert PressStudy(sensor_sheet=str(inside)).sensor_sheet == str(inside)
    lab = tmp_path / "lab"
    lab.mkdir()
    monkeypatch.setenv(ROOTS_ENV, os.pathsep.join(["/nonexistent", str(lab)]))
    assert PressStudy(data=str(lab / "t.csv")).data == str(lab / "t.csv")
    assert "outside" in _refused(PressStudy, data=str(tmp_path / "t.csv"))


def test_ingested_data_by_campaign_reference(root: Path) -> None:
    study = PressStudy.model_validate({"data": "campaign:line-1"})
    path = Path(str(study.data))
    assert root.resolve() in path.resolve().parents and path.is_file()
    pd.testing.assert_frame_equal(pd.read_parquet(path), campaign_table(root, "press", "line-1"))
    from ingestion.ledger import Ledger

    records = Ledger(root / "ledger.jsonl").read()
    first = next(r for r in records if r["name"] == "line-1__a.csv")
    one = PressStudy.model_validate({"data": f"campaign:line-1@{first['sha256'][:8]}"})
    assert len(pd.read_parquet(str(one.data))) == first["rows"]
    recording = next(r for r in records if r["study"] == "drive")
    drive = DriveSearch.model_validate({"data": f"campaign:rig@{recording['sha256'][:10]}"})
    assert list(pd.read_parquet(str(drive.data)).columns) == ["t_s", "torque_Nm", "velocity_rad_s"]
    assert "no ingested data of campaign 'line-9' (campaigns: line-1)" in _refused(
        PressStudy, data="campaign:line-9"
    )
    assert "with hash 00000000" in _refused(PressStudy, data="campaign:line-1@00000000")
    assert "not a data reference" in _refused(PressStudy, data="campaign:../../etc")
    assert "names measurements" in _refused(PressStudy, sensor_sheet="campaign:line-1")


def test_the_form_offers_the_ingested_campaigns(root: Path) -> None:
    press = PressStudy.model_json_schema()["properties"]["data"]
    assert press["examples"] == ["campaign:line-1"]
    drive = DriveSearch.model_json_schema()["properties"]["data"]
    assert drive["examples"] == ["campaign:rig"]


def test_the_cli_user_names_any_file_but_only_for_their_own_run(root: Path, tmp_path: Path) -> None:
    own = tmp_path / "mine.csv"
    study = settings_from_cli(PressStudy, {"data": own})  # the trusted CLI user's own file
    assert study.data == str(own.resolve())
    assert str(own.resolve()) in os.environ[FILES_ENV]  # inherited by the workers it starts
    assert "outside" in _refused(PressStudy, data=str(tmp_path / "other.csv"))
    by_reference = settings_from_cli(PressStudy, {"data": Path("campaign:line-1")})
    assert root.resolve() in Path(str(by_reference.data)).resolve().parents

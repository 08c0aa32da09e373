"""`greylab ingest`: options from `IngestSettings` plus the CLI user's own folders, wired to
`run_ingest` (the flow itself is tested in test_ingest_flow.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flows.cli import main
from flows.ingest.settings import IngestSettings


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """`run_ingest` replaced by a recorder of its arguments (no Prefect server, no files)."""
    from flows.ingest import flow as ingest_flow

    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    seen: list[dict[str, Any]] = []

    def fake(settings: IngestSettings, *, inbox: Any = None, data_root: Any = None) -> dict:
        seen.append({"settings": settings, "inbox": inbox, "data_root": data_root})
        counts = dict.fromkeys(("ingested", "resumed", "duplicate", "quarantined", "skipped"), 0)
        return {"counts": counts, "outcomes": [], "rows": 0, "data_root": str(data_root)}

    monkeypatch.setattr(ingest_flow, "run_ingest", fake)
    return seen


def test_defaults_the_terminal_settle_window_and_own_folders(calls, tmp_path, capsys) -> None:
    assert main(["ingest", "--json"]) == 0
    assert calls[0] == {"settings": IngestSettings(settle_seconds=5.0), "inbox": None,
                        "data_root": None}  # fmt: skip
    assert IngestSettings().settle_seconds == 60.0  # the form's (scheduled) default
    args = ["ingest", "--inbox", str(tmp_path / "in"), "--data-root", str(tmp_path / "lab"),
            "--dry-run", "--trigger-studies", "--settle-seconds", "0", "--campaign", "line-1",
            "--no-track", "--experiment", "lab-2", "--json"]  # fmt: skip
    capsys.readouterr()
    assert main(args) == 0
    assert calls[1]["settings"] == IngestSettings(
        dry_run=True, trigger_studies=True, settle_seconds=0.0, campaign="line-1", track=False,
        experiment="lab-2",
    )  # fmt: skip
    assert (calls[1]["inbox"], calls[1]["data_root"]) == (tmp_path / "in", tmp_path / "lab")
    assert json.loads(capsys.readouterr().out)["data_root"] == str(tmp_path / "lab")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--campaign", "../x"], "--campaign: String should match pattern"),
        (["--settle-seconds", "-1"], "--settle-seconds: Input should be greater than or equal"),
        (["--experiment", "../../escape"], "--experiment"),
    ],
)
def test_bad_settings_exit_2_naming_the_option(calls, capsys, argv, needle) -> None:
    assert main(["ingest", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and not calls

"""Helpers of the ingestion core tests: ledger records, expected rows, one press file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ingestion.ledger import Ledger
from tests.tasks.ingest_data import press_frame, write

PRESS_KEY = ["campaign", "series", "step", "sensor", "force_setpoint_N", "force_N"]
DRIVE_KEY = ["campaign", "t_s", "torque_Nm", "velocity_rad_s"]


class Crash(RuntimeError):
    """A simulated crash (kill) at a chosen point."""


def ledger_of(root: Path) -> list[dict[str, Any]]:
    return Ledger(root / "ledger.jsonl").read()


def expected_rows(entries: list[tuple[str, pd.DataFrame]], key: list[str]) -> pd.DataFrame:
    frames = [frame.assign(campaign=campaign) for campaign, frame in entries]
    return sorted_rows(pd.concat(frames, ignore_index=True), key)


def sorted_rows(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    frame = frame.astype({"campaign": str, **({"sensor": str} if "sensor" in frame else {})})
    return frame.sort_values(key, kind="stable").reset_index(drop=True)


def one_press_file(tmp_path: Path, name: str = "line-1__a.csv") -> tuple[Path, Path, Path]:
    inbox, root = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    path = write(inbox, name, press_frame(np.random.default_rng(1)))
    return inbox, root, path

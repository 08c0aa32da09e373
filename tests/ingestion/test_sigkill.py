"""SIGKILL in the middle of writing a part (a child process), and the next run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ingestion.readers import read_dataset
from ingestion.results import Status
from ingestion.run import ingest_inbox
from tests.ingestion.helpers import (
    PRESS_KEY,
    expected_rows,
    ledger_of,
    sorted_rows,
)
from tests.tasks.ingest_data import press_frame, write

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
from ingestion.run import ingest_inbox
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
    assert len([r for r in ledger_of(root) if r["status"] == "ingested"]) == 3
    assert len(list(inbox.iterdir())) == 3

    report = ingest_inbox(inbox, root)
    assert report.count(Status.ingested) == 3
    assert not list(inbox.iterdir())
    assert not list((root / "datasets").rglob(".*"))
    assert len([r for r in ledger_of(root) if r["status"] == "ingested"]) == 6
    got = read_dataset(root, "press").drop(columns=["source_sha256"])
    expected = expected_rows(inputs, PRESS_KEY)
    pd.testing.assert_frame_equal(
        sorted_rows(got, PRESS_KEY)[expected.columns], expected, check_dtype=False
    )

"""Test services end with the test process that started them, also when it is killed
(`tests.integration.services.with_parent`): a time limit that kills pytest must not leave
servers behind (it did: a Prefect and an MLflow server outlived a killed browser test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux parent-death signal")
def test_a_service_ends_when_its_starter_is_killed() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import subprocess, sys, time
            from tests.integration.services import with_parent
            child = subprocess.Popen(with_parent([sys.executable, "-c", "import time; time.sleep(120)"]),
                                     start_new_session=True)
            print(child.pid, flush=True)
            time.sleep(120)
        """)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        service = int(starter.stdout.readline())  # type: ignore[union-attr]
        time.sleep(0.5)
        assert _alive(service)
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(service) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(service), "the service outlived the killed process that started it"
    finally:
        starter.kill()
        if "service" in locals() and _alive(service):
            os.kill(service, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"

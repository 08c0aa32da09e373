"""The test process's shared Prefect server (tests/conftest.py, issue 31): one per pytest
process, on 127.0.0.1, a child of this process, the Prefect API of in-process flows and of the
commands tests start; `own_prefect_server` leaves a test's commands to their own servers."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests import conftest

pytestmark = pytest.mark.skipif(
    os.environ.get(conftest.SHARED_ENV) == "own",
    reason="GREYLAB_TEST_PREFECT=own: no shared server",
)


def test_one_server_per_test_process_on_loopback_is_the_prefect_api() -> None:
    from prefect.settings import get_current_settings

    url = os.environ["PREFECT_API_URL"]
    assert url == os.environ[conftest.URL_ENV] == get_current_settings().api.url
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port == conftest._SERVER["port"]
    with urllib.request.urlopen(f"{url}/health", timeout=10) as answer:
        assert answer.status == 200
    pid = conftest._SERVER["pid"]
    stat = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    assert int(stat[1]) == os.getpid()  # our child: stopped with this process
    assert int(stat[2]) == pid  # its own process group, stopped as one at the end
    command = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    assert command[1:5] == [b"-P", b"-m", b"runtime.server_guard", str(os.getpid()).encode()]


def _seen() -> str:
    code = "import os; print(os.environ.get('PREFECT_API_URL'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return done.stdout.strip()


def test_a_command_a_test_starts_inherits_it() -> None:
    assert _seen() == os.environ["PREFECT_API_URL"] == os.environ[conftest.URL_ENV]


def test_a_test_that_owns_its_server_gives_its_commands_none(own_prefect_server: None) -> None:
    assert _seen() == "None" and conftest.URL_ENV not in os.environ

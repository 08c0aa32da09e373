"""The local Prefect server the CLI shares between calls (`runtime.local_server`, issue 31).

Real servers on 127.0.0.1 under a temporary `PREFECT_HOME`: reused by the next call, started
once by two concurrent callers (the lock), stopping itself when idle, stopped on request, and
never trusted from a state file whose pid runs something else. Every loop is bounded; every
server a test starts is killed by pid in its teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from methods.errors import InputError
from runtime import local_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("own_prefect_server"),
]  # the servers checked here


def _alive(pid: int) -> bool:
    """Running (a zombie counts as gone; our own children are reaped here)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def _servers(home: Path) -> list[int]:
    """Pids of greylab's shared servers started for `home` (by their command line)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            command = _cmdline(int(entry.name))
            if "runtime.server_guard detached:" in command and _env_home(int(entry.name)) == home:
                out.append(int(entry.name))
    return out


def _env_home(pid: int) -> Path | None:
    with contextlib.suppress(OSError):
        for item in (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0"):
            if item.startswith(b"PREFECT_HOME="):
                return Path(item.split(b"=", 1)[1].decode())
    return None


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    prefect = (tmp_path / "prefect").resolve()
    monkeypatch.setenv("PREFECT_HOME", str(prefect))
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "greylab"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    yield prefect
    for pid in _servers(prefect):  # teardown: every server of this home, by pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _alive(pid)


def _health(url: str) -> int:
    with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
        return int(answer.status)


def test_the_next_call_reuses_the_running_server_and_stop_ends_it(home: Path) -> None:
    url = local_server.ensure_server(idle=120, timeout=120)
    assert url.startswith("http://127.0.0.1:") and _health(url) == 200
    state = local_server.read_state(home)
    assert state is not None and url == local_server.api_url(state)
    command = _cmdline(state["pid"])
    assert " -P -m runtime.server_guard detached:120 " in command  # no working folder imported
    assert "--host 127.0.0.1" in command
    assert local_server.ensure_server(idle=120, timeout=120) == url  # reused, not restarted
    assert _servers(home) == [state["pid"]]
    assert local_server.server_status(home)["pid"] == state["pid"]
    assert local_server.stop_server(home) == state["pid"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(state["pid"]):
        time.sleep(0.1)
    assert not _alive(state["pid"])
    assert local_server.server_status(home)["running"] is False
    assert local_server.stop_server(home) is None  # nothing left to stop


def test_two_commands_at_once_start_one_server_which_stops_itself_when_idle(home: Path) -> None:
    """Two processes call `ensure_server` together: the lock lets one start the server, the
    other finds it. With nobody calling, it ends after its idle time (4 s here)."""
    code = (
        "import sys; from runtime.local_server import ensure_server\n"
        "print(ensure_server(idle=4, timeout=120))\n"
    )
    callers = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PREFECT_HOME": str(home)},
        )
        for _ in range(2)
    ]
    urls = [caller.communicate(timeout=180)[0].strip() for caller in callers]
    assert all(c.returncode == 0 for c in callers)
    assert urls[0] == urls[1] and urls[0].startswith("http://127.0.0.1:")
    pids = _servers(home)
    assert len(pids) == 1, pids
    # 4 s idle + the watcher's period (1 s) + uvicorn's shutdown; 30 s is generous on a
    # loaded 2-core machine, and far below the default 300 s a broken idle stop would show
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(pids[0]):
        time.sleep(0.2)
    assert not _alive(pids[0]), "the shared server did not stop itself when idle"


def test_a_state_file_naming_another_process_is_not_trusted(home: Path) -> None:
    home.mkdir(parents=True)
    (home / local_server.STATE_FILE).write_text(json.dumps({"pid": os.getpid(), "port": 1}))
    state = local_server.read_state(home)
    assert state == {"pid": os.getpid(), "port": 1, "started": 0.0}  # from an older greylab
    assert not local_server.healthy(state)  # this pytest process is not a greylab server
    assert local_server.stop_server(home) is None  # and is never signalled
    assert not (home / local_server.STATE_FILE).exists()


@pytest.mark.parametrize("raw", ["-1", "abc", "nan", "1e9"])
def test_a_bad_idle_time_is_an_input_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(InputError, match="GREYLAB_SERVER_IDLE"):
        local_server.idle_seconds({"GREYLAB_SERVER_IDLE": raw})


def test_idle_time_default_and_zero() -> None:
    assert local_server.idle_seconds({}) == local_server.DEFAULT_IDLE_S
    assert local_server.idle_seconds({"GREYLAB_SERVER_IDLE": "0"}) == 0.0


def test_when_the_shared_server_stops() -> None:
    """Idle (no open connection, no message for `idle` s) stops it; an open connection keeps
    it, but never beyond an hour of silence (a stopped client holding its websocket)."""
    from runtime.server_guard import SILENT_MAX_S, should_stop

    assert not should_stop(0, 119.0, 120.0)
    assert should_stop(0, 121.0, 120.0)
    assert not should_stop(1, 121.0, 120.0)  # a flow run is connected
    assert not should_stop(1, SILENT_MAX_S - 1, 120.0)
    assert should_stop(1, SILENT_MAX_S + 1, 120.0)
    assert not should_stop(1, 2 * SILENT_MAX_S - 1, 2 * SILENT_MAX_S)  # a longer idle wins

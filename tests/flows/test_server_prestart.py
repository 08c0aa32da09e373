"""The shared server launched before the flow's imports (`runtime.local_server.prestart`).

A command launches the server once its input is checked and imports its flow meanwhile;
`ensure_server` then waits for that server instead of starting another. Real servers on
127.0.0.1 under a temporary `PREFECT_HOME`, killed by pid in the fixture's teardown.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from flows import runners
from runtime import local_server
from runtime.stores import store_lock
from tests.flows.test_local_server import _alive, _health, _servers, home  # noqa: F401

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("own_prefect_server"),
]  # the servers checked here


def test_ensure_server_waits_for_the_prestarted_server(home: Path) -> None:  # noqa: F811
    local_server.prestart(idle=60)
    state = local_server.read_state(home)
    assert state is not None and local_server._ours(state["pid"])  # launched, recorded
    assert time.time() - state["started"] < 60
    url = local_server.ensure_server(idle=60, timeout=120)
    assert url == local_server.api_url(state) and _health(url) == 200
    assert _servers(home) == [state["pid"]]  # the same server, no second one
    local_server.prestart(idle=60)  # a running server: nothing launched
    assert _servers(home) == [state["pid"]]
    assert local_server.ensure_server(idle=60, timeout=120) == url


def test_prestart_leaves_it_to_the_process_holding_the_lock(home: Path) -> None:  # noqa: F811
    home.mkdir(parents=True)
    with store_lock(home / "local-server"):
        local_server.prestart(idle=60)  # returns at once, launching nothing
    assert local_server.read_state(home) is None and _servers(home) == []


def test_a_prestarted_server_that_dies_is_replaced(home: Path) -> None:  # noqa: F811
    local_server.prestart(idle=60)
    state = local_server.read_state(home)
    assert state is not None
    os.kill(state["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(state["pid"]):
        time.sleep(0.05)
    url = local_server.ensure_server(idle=60, timeout=120)
    assert _health(url) == 200
    (pid,) = _servers(home)
    assert pid != state["pid"]


def test_only_a_command_that_shares_the_server_prestarts_it(
    home: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home.mkdir(parents=True)
    monkeypatch.setenv("GREYLAB_SERVER_IDLE", "60")
    for share, api, idle in ((False, None, "60"), (True, "http://127.0.0.1:9/api", "60"),
                             (True, None, "0")):  # fmt: skip
        monkeypatch.setattr(runners, "SHARE_SERVER", share)
        if api:
            monkeypatch.setenv("PREFECT_API_URL", api)
        else:
            monkeypatch.delenv("PREFECT_API_URL", raising=False)
        monkeypatch.setenv("GREYLAB_SERVER_IDLE", idle)
        runners.prestart_shared_server()
        assert local_server.read_state(home) is None and _servers(home) == []
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("GREYLAB_SERVER_IDLE", "60")
    monkeypatch.setattr(runners, "SHARE_SERVER", True)
    runners.prestart_shared_server()
    state = local_server.read_state(home)
    assert state is not None and _servers(home) == [state["pid"]]


def test_every_study_command_launches_the_server_at_its_start() -> None:
    """`flows.cli.FLOW_COMMANDS` names exactly the commands built on a study's settings
    (`with_settings`): a new study command missing there would wait for its server."""
    from flows.cli import FLOW_COMMANDS, build_app

    def commands(app: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
        out = [((*path, c.name or c.callback.__name__.replace("_", "-")), c.callback)
               for c in app.registered_commands]  # fmt: skip
        for group in app.registered_groups:
            out += commands(group.typer_instance, (*path, group.name))
        return out

    found = commands(build_app())
    assert len(found) > 10  # the tree was walked
    studies = {path for path, callback in found if "with_settings" in callback.__code__.co_qualname}
    assert studies == FLOW_COMMANDS


def test_the_cli_launches_it_for_a_study_command_only(home: Path) -> None:  # noqa: F811
    """`press detect` launches the server at its start (here its bad model is found later:
    the server stays for its idle time); `--help` and a command without a flow never do."""
    import subprocess
    import sys

    env = {**os.environ, "PREFECT_HOME": str(home), "GREYLAB_HOME": str(home.parent / "g"),
           "GREYLAB_SERVER_IDLE": "30", "GREYLAB_WARM": "0"}  # fmt: skip
    greylab = [sys.executable, "-P", "-c", "from flows.cli import main; raise SystemExit(main())"]
    for args, launches in ((["press", "detect", "--help"], False),
                           (["press", "check", "--help"], False),
                           (["press", "detect", "--model", "NOPE", "--tests", "2"], True)):  # fmt: skip
        done = subprocess.run([*greylab, *args], env=env, capture_output=True, text=True,
                              timeout=300, cwd=home.parent)  # fmt: skip
        assert done.returncode == (2 if launches else 0), done.stderr[-2000:]
        assert bool(_servers(home)) is launches, args


@pytest.mark.parametrize("started", ['"abc"', "null", "[]", '"nan"', "1e308", "-1e308"])
def test_a_crafted_start_time_never_makes_a_command_wait_on_another_process(
    home: Path,  # noqa: F811
    started: str,
) -> None:
    """The state file's start time is untrusted: unreadable, it is no state; whatever it says,
    a pid that is not one of our servers (this pytest process) is never waited for."""
    import json as _json

    home.mkdir(parents=True)
    (home / local_server.STATE_FILE).write_text(
        f'{{"pid": {os.getpid()}, "port": 1, "started": {started}}}'
    )
    state = local_server.read_state(home)
    assert state is None or not local_server._ours(state["pid"])
    assert _json.loads((home / local_server.STATE_FILE).read_text())["port"] == 1
    url = local_server.ensure_server(idle=30, timeout=120)  # starts its own at once
    assert _health(url) == 200 and len(_servers(home)) == 1

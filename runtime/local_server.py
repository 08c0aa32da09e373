"""A local Prefect server shared by greylab's command-line calls (issue 31).

Prefect's temporary server costs every CLI call 3-5 s (10 s with a fresh home, whose database
is created) plus the import of Prefect's server modules (about 2 s). The CLI therefore reuses
one local server per `PREFECT_HOME`:

- started on demand by the first command that runs a flow (`ensure_server`), detached (its own
  session, so it survives the command), as `python -P -m runtime.server_guard detached:IDLE --
  <uvicorn arguments>`: bound to 127.0.0.1 on a free port, never importing from the working
  folder (`neutral_environment`), Prefect's database migrated under its lock first;
- launched early (`prestart`, called by the CLI at the start of a command that runs a flow)
  without waiting for it: the server starts while the command loads, and `ensure_server`
  then waits for that server (its state file records when it started; a
  server still not answering after the start timeout is replaced);
- found again by the next command through `$PREFECT_HOME/local-server.json` (pid, port), trusted
  only when that pid runs `runtime.server_guard` and `/api/health` answers within a second;
- started or checked under the file lock `$PREFECT_HOME/local-server.lock` (two commands at
  once start one server);
- stopping itself after `GREYLAB_SERVER_IDLE` seconds (default 120) without a message and
  without an open request or connection, and after an hour without any message even with one
  open (`runtime.server_guard.should_stop`): a server outlives the command that started it by that
  much at most, also when the command was killed; `greylab server stop` stops it now.

It listens on 127.0.0.1 without authentication, as Prefect's temporary server does, but for up
to the idle time after a command instead of during it: other local users of the machine can
reach it meanwhile (set `GREYLAB_SERVER_IDLE=0` where that matters). A server started by an
older greylab keeps serving until it idles out or `greylab server stop`.

`GREYLAB_SERVER_IDLE=0` restores a temporary server per command (dies with it, even on
SIGKILL); a set `PREFECT_API_URL` (a real server) is used as is. Standard library only (and the
stdlib-only atomic writer of `schemas.storage`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

IDLE_ENV = "GREYLAB_SERVER_IDLE"
DEFAULT_IDLE_S = 120.0
MAX_IDLE_S = 7 * 24 * 3600.0
STATE_FILE = "local-server.json"
START_TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parents[1]


def idle_seconds(env: dict[str, str] | None = None, name: str = IDLE_ENV) -> float:
    """`GREYLAB_SERVER_IDLE` in seconds (0: no shared server); bad values are an InputError.
    `name`: another idle variable with the same rules (`runtime.warm`'s `GREYLAB_WARM_IDLE`)."""
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= MAX_IDLE_S:
        from methods.errors import InputError

        zero = "a temporary server per command" if name == IDLE_ENV else "stop when idle"
        raise InputError(
            f"environment variable {name}={raw[:40]!r}: expected seconds from 0 ({zero}) to "
            f"{MAX_IDLE_S:g}"
        )
    return value


def prefect_home() -> Path:
    """Prefect's home (`PREFECT_HOME`, set by `runtime.settings.apply_environment`)."""
    from runtime.settings import load_settings

    return Path(os.environ.get("PREFECT_HOME") or load_settings().home / "prefect").resolve()


def neutral_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """A child's environment without the working folder on its import path: `PYTHONSAFEPATH`
    set, and `PYTHONPATH` without entries that are empty or name the working folder (unless
    that folder is greylab's own project)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONSAFEPATH"] = "1"
    here = Path.cwd().resolve()
    kept = []
    for entry in env.get("PYTHONPATH", "").split(os.pathsep):
        with contextlib.suppress(OSError):
            where = Path(entry).resolve()
            if entry and (where != here or where == ROOT):
                kept.append(entry)
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        env.pop("PYTHONPATH", None)
    return env


def read_state(home: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((home / STATE_FILE).read_text())
        return {"pid": int(state["pid"]), "port": int(state["port"]),
                "started": float(state.get("started", 0.0))}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_state(home: Path, state: dict[str, Any]) -> None:
    from schemas.storage import write_text_atomic

    text = json.dumps({"pid": state["pid"], "port": state["port"], "started": state["started"]})
    write_text_atomic(text, home / STATE_FILE)


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _ours(pid: int) -> bool:
    """`pid` runs a greylab server (a recycled pid running something else is not ours)."""
    return "runtime.server_guard detached:" in _cmdline(pid)


def healthy(state: dict[str, Any] | None, timeout: float = 1.0) -> bool:
    if not state or not _ours(state["pid"]):
        return False
    try:
        url = f"http://127.0.0.1:{state['port']}/api/health"
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return bool(answer.status == 200)
    except (OSError, ValueError):
        return False


def api_url(state: dict[str, Any]) -> str:
    return f"http://127.0.0.1:{state['port']}/api"


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _launch(home: Path, idle: float) -> dict[str, Any]:
    port = _free_port()
    uvicorn = ["--app-dir", str(ROOT), "--factory", "runtime.server_guard:idle_app", "--host",
               "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"]  # fmt: skip
    env = neutral_environment()
    env.update(PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT_HOME=str(home))
    env.pop("PREFECT_API_URL", None)
    with open(home / "local-server.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "runtime.server_guard", f"detached:{idle:g}", "--",
             *uvicorn],
            cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    return {"pid": process.pid, "port": port, "process": process, "started": time.time()}


def _wait_healthy(state: dict[str, Any], timeout: float) -> bool:
    """Wait until the server of `state` answers; False when it ended or `timeout` passed.
    `state` holds the `Popen` of a server this process launched, else its pid is watched."""
    process = state.get("process")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None if process is not None else not _ours(state["pid"]):
            return False
        if healthy(state, timeout=2.0):
            return True
        time.sleep(0.1)
    return False


#: the server `prestart` launched from this process (its state, with the `Popen`)
_STARTING: dict[str, Any] = {}


def prestart(idle: float | None = None) -> None:
    """Launch the shared server now, without waiting for it, when the state file names no
    live server of ours (running or starting): the command imports its study meanwhile and
    `ensure_server` then waits for this server (issue 31: a server's 4-6 s start and a
    command's 2-4 s of imports overlap). Returns at once when another process holds the
    lock (it is starting one) or anything fails: `ensure_server` still decides."""
    from runtime.stores import StoreError, store_lock

    idle = idle_seconds() if idle is None else idle
    home = prefect_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        with store_lock(home / "local-server", timeout=0.0):
            state = read_state(home)
            if state is not None and _ours(state["pid"]):
                return
            state = _launch(home, idle)
            deadline = time.monotonic() + 5.0  # /proc shows the command line once exec is done:
            while not _ours(state["pid"]) and time.monotonic() < deadline:  # before that,
                if state["process"].poll() is not None:  # another command would not trust it
                    return
                time.sleep(0.005)
            _write_state(home, state)
            _STARTING.clear()
            _STARTING.update(state)
    except (StoreError, OSError):
        return


def ensure_server(idle: float | None = None, timeout: float = START_TIMEOUT_S) -> str:
    """The API URL of the shared local server of this `PREFECT_HOME`, started if none is
    healthy. Raises `RuntimeError` when no server answers within `timeout`."""
    from runtime.stores import store_lock

    idle = idle_seconds() if idle is None else idle
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    with store_lock(home / "local-server", timeout=timeout + 30):
        state = read_state(home)
        if healthy(state):
            assert state is not None
            return api_url(state)
        age = time.time() - state["started"] if state is not None else math.inf
        if state is not None and _ours(state["pid"]) and 0 <= age < timeout:  # still starting
            if _STARTING.get("pid") == state["pid"]:  # started by `prestart` in this process
                state = dict(_STARTING)
            if _wait_healthy(state, timeout - age):
                return api_url(state)
            _terminate(state["pid"])
        for _attempt in range(2):  # a port taken between choosing and binding: once more
            state = _launch(home, idle)
            if _wait_healthy(state, timeout):
                _write_state(home, state)
                return api_url(state)
            _terminate(state["pid"])
    raise RuntimeError(
        f"the local Prefect server did not start within {timeout:g} s (see "
        f"{home / 'local-server.log'}); set {IDLE_ENV}=0 to use a temporary server per command"
    )


def _terminate(pid: int, wait: float = 10.0, ours: Any = None) -> bool:
    """SIGTERM, then SIGKILL after `wait` seconds; True when the process is gone. `ours(pid)`:
    whether the pid still runs the process meant (default: a shared server)."""
    ours = _ours if ours is None else ours
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not ours(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def stop_server(home: Path | None = None) -> int | None:
    """Stop the shared server of `home` (default: this `PREFECT_HOME`); its pid, or None."""
    home = prefect_home() if home is None else home
    state = read_state(home)
    if state is None or not _ours(state["pid"]):
        with contextlib.suppress(OSError):
            (home / STATE_FILE).unlink()
        return None
    _terminate(state["pid"])
    with contextlib.suppress(OSError):
        (home / STATE_FILE).unlink()
    return int(state["pid"])


def server_status(home: Path | None = None) -> dict[str, Any]:
    home = prefect_home() if home is None else home
    state = read_state(home)
    up = healthy(state)
    return {"running": up, "pid": state["pid"] if up and state else None,
            "api_url": api_url(state) if up and state else None, "home": str(home),
            "idle_seconds": idle_seconds()}  # fmt: skip

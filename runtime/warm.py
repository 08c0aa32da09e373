"""A warm command line: a per-user fork server holding the CLI's imports (issue 31).

Importing typer, Prefect, MLflow, numpy/scipy/CasADi and the study modules costs a `greylab`
command 3-6 s before it does anything. The daemon here imports them once and forks a fresh
child per command; the `greylab` console script (`flows.cli.main`) is a thin client:

- **Started on demand, detached, idling out** like the shared Prefect server
  (`runtime.local_server`): the first command that finds no daemon starts one (`python -P -m
  runtime.warm_daemon serve`, its own session) and runs in-process itself; the daemon exits after
  `GREYLAB_WARM_IDLE` seconds (default 120) without a request and without a running child.
  `GREYLAB_WARM=0` turns all of this off. `greylab server status|stop` show and stop it.
- **Keyed** on what a process reads at import time: the `GREYLAB_*`, `PREFECT_*`, `MLFLOW_*`,
  `PYTHON*`, locale and `HOME`/`TZ` variables, the working folder (greylab's default home is
  `./.greylab`; Prefect reads `.env`, `prefect.toml` and `pyproject.toml` there), the
  interpreter and greylab's folder (`key`). Different keys are different daemons.
- **Never stale**: before every fork the daemon compares the files it was built from (every
  loaded module of greylab's folder, the site-packages folders, Prefect's profiles and the
  working folder's settings files; size and mtime) with their state when it started; on any
  change it answers "stale", the client runs in-process and the daemon exits.
- **Private**: a Unix socket `warm-<key>.sock` in `$XDG_RUNTIME_DIR/greylab` or
  `/tmp/greylab-<uid>` (mode 0700, owned by the user, not a link: else no warm path), socket
  mode 0600, and the daemon serves only peers of its own uid (`SO_PEERCRED`).
- **Faithful**: the client passes argv, the working folder, its whole environment and its
  stdin/stdout/stderr descriptors (`SCM_RIGHTS`); the child takes them over (`os.environ`
  replaced, `dup2` onto 0/1/2), so output, exit code and interruption are the command's own.
- **Never lost, never doubled**: the child runs only after the client, having read
  "started <pid>", answers "go"; a client that gave up before (no daemon, a bad socket, a
  daemon dying, a timeout) closes the connection, the child sees that and exits without
  running, and the client runs the command in-process. After "go" the client forwards
  SIGINT/SIGTERM to the child and exits with its exit code (the child reports it last thing
  before `os._exit`; the daemon reports a child killed by a signal, and the client then dies
  of the same signal). A client that disappears (SIGKILL) takes its child with it (SIGTERM).

Threads and forks: the daemon imports without starting threads or event loops (checked:
`threading.active_count() == 1` after the preload, else it does not serve) and is
single-threaded, so every child starts from a consistent copy. What children share with the
daemon and a cold process does not: the string hash seed (set iteration order is fixed per
daemon); numpy's legacy global random state and Python's `random` are reseeded in each child.

Standard library only on the client's side (the console script must stay cheap to import).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

WARM_ENV = "GREYLAB_WARM"
IDLE_ENV = "GREYLAB_WARM_IDLE"
ROOT = Path(__file__).resolve().parents[1]
#: environment read at import time by some module (a daemon per distinct value)
KEY_PREFIXES = ("GREYLAB_", "PREFECT_", "MLFLOW_", "PYTHON", "LC_")
KEY_NAMES = ("LANG", "LANGUAGE", "HOME", "TZ", "USER", "GIT_PYTHON_REFRESH")
#: files in the working folder Prefect's settings read when they are created (at import)
CWD_FILES = (".env", "prefect.toml", "pyproject.toml")
PROTOCOL = 1
#: seconds the client waits for "started" before running in-process itself
START_REPLY_S = 20.0
_HEADER = struct.Struct("!Q")
#: the longest Unix socket path Linux binds (sun_path is 108 bytes with its final NUL)
MAX_SOCKET_PATH = 107
MARKER = "runtime.warm_daemon serve"


# ---------------------------------------------------------------- configuration, key, paths


def enabled(env: Mapping[str, str] | None = None) -> bool:
    raw = (os.environ if env is None else env).get(WARM_ENV, "").strip().lower()
    return raw not in ("0", "off", "false", "no")


def idle_seconds(env: Mapping[str, str] | None = None) -> float:
    """`GREYLAB_WARM_IDLE` (default 120 s; the parser of `runtime.local_server`)."""
    from runtime.local_server import idle_seconds as parse

    return parse(dict(os.environ if env is None else env), IDLE_ENV)


def key(env: Mapping[str, str], cwd: str) -> str:
    """What a daemon's imports may depend on, hashed: equal keys may share a daemon."""
    picked = sorted(
        (k, v) for k, v in env.items()
        if (k.startswith(KEY_PREFIXES) or k in KEY_NAMES) and k not in (WARM_ENV, IDLE_ENV)
    )  # fmt: skip
    text = json.dumps([PROTOCOL, os.path.realpath(sys.executable), str(ROOT), cwd, picked])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def socket_dir(create: bool = True) -> Path | None:
    """The user's private folder for the daemons' sockets, or None when it is not private
    (another owner, group/other permissions, a symbolic link) or cannot be made."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = Path(runtime) / "greylab" if runtime else Path(f"/tmp/greylab-{os.getuid()}")
    if create:
        with contextlib.suppress(FileExistsError, OSError):
            os.mkdir(base, 0o700)
    try:
        info = os.lstat(base)
    except OSError:
        return None
    private = (
        stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) == 0o700
    )  # fmt: skip
    return base if private else None


LOG_BYTES = 1 << 20  # the daemon log's size at which its next daemon starts it over


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def paths(folder: Path, digest: str) -> dict[str, Path]:
    return {n: folder / f"warm-{digest}.{n}" for n in ("sock", "lock", "json", "log")}


# ---------------------------------------------------------------- the client


def run(argv: list[str], preload: str, entry: str) -> int | tuple[str, int] | None:
    """Run the command `argv` (as `sys.argv`) in a warm child: its exit code, ("signal", n)
    when it was killed by signal n, or None when the warm path is unavailable before the
    command started (the caller then runs it in-process; a daemon is started for the next
    command when none runs). The daemon imports with `preload` and runs `entry` in each
    child (`module:function` names)."""
    if not enabled():
        return None
    folder = socket_dir()
    if folder is None:
        return None
    try:
        cwd = os.getcwd()
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return None
    env = dict(os.environ)
    digest = key(env, cwd)
    where = paths(folder, digest)
    if len(os.fsencode(where["sock"])) > MAX_SOCKET_PATH:
        return None
    sock = _connect(where["sock"])
    if sock is None:
        _start_daemon(where, env, preload, entry)
        return None
    with sock:
        outcome = _converse(sock, argv, cwd, env, digest)
    if isinstance(outcome, str):  # "stale": the daemon let go of its lock; a fresh one for later
        _start_daemon(where, env, preload, entry)
        return None
    return outcome


def _connect(path: Path) -> socket.socket | None:
    try:
        info = os.lstat(path)
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(START_REPLY_S)
        sock.connect(str(path))
        return sock
    except OSError:
        return None


def _converse(
    sock: socket.socket, argv: list[str], cwd: str, env: dict[str, str], digest: str
) -> int | tuple[str, int] | str | None:
    ignored = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) == signal.SIG_IGN]
    payload = json.dumps({"v": PROTOCOL, "key": digest, "argv": argv, "cwd": cwd, "env": env,
                          "ignored": [int(s) for s in ignored]})  # fmt: skip
    data = payload.encode("utf-8", "surrogateescape")
    reader = _Lines(sock)
    try:
        socket.send_fds(sock, [_HEADER.pack(len(data))], [0, 1, 2])
        sock.sendall(data)
        first = reader.line()
    except (OSError, ValueError):
        return None  # no child was started for us, or it will see our close and not run
    if first == "stale":
        return "stale"
    if not first.startswith("started "):
        return None  # "refused", end of file
    pid = int(first.split()[1])
    forward = _forward_signals(pid)
    try:
        sock.settimeout(None)
        sock.sendall(b"go\n")  # committed: from here the command runs in the child
        while True:
            try:
                line = reader.line()
            except InterruptedError:
                continue
            except OSError:
                line = ""
            if line.startswith("exit "):
                return int(line.split()[1])
            if line.startswith("signal "):
                return ("signal", int(line.split()[1]))
            if not line:  # the daemon and the child are gone without a word
                sys.stderr.write(
                    "greylab: internal error: the warm worker ended without an exit code "
                    "(set GREYLAB_WARM=0 to run commands in-process)\n"
                )
                return 1
    finally:
        forward()


class _Lines:
    """Lines from a socket (no buffering beyond the socket's own)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.rest = sock, b""

    def line(self) -> str:
        while b"\n" not in self.rest:
            chunk = self.sock.recv(4096)
            if not chunk:
                return ""
            self.rest += chunk
        line, self.rest = self.rest.split(b"\n", 1)
        return line.decode()


def _forward_signals(pid: int) -> Callable[[], None]:
    """SIGINT and SIGTERM of the client go to the child (unless this process ignores them, as
    a background job of a shell ignores SIGINT: then the child ignores them too); returns the
    restorer."""

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(s) != signal.SIG_IGN}  # fmt: skip

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    return restore


def _start_daemon(where: dict[str, Path], env: dict[str, str], preload: str, entry: str) -> None:
    """Start a daemon for this key unless one holds its lock (one starting or stopping). It
    gets the client's environment as is (its key) and runs as `python -P`, like the console
    script never importing from the working folder."""
    if _locked(where["lock"]):
        return
    import subprocess

    try:
        # one line per command: a log past LOG_BYTES starts over when its next daemon starts
        mode = "wb" if _size(where["log"]) > LOG_BYTES else "ab"
        with open(where["log"], mode) as log:
            os.chmod(where["log"], 0o600)
            subprocess.Popen(
                [sys.executable, "-P", "-m", "runtime.warm_daemon", "serve", str(where["sock"]), preload,
                 entry],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, close_fds=True, cwd=os.getcwd(),
            )  # fmt: skip
    except OSError:
        pass  # no warm path this time either


def _locked(lock: Path) -> bool:
    """Whether a daemon holds `lock` (it does for its whole life)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True  # cannot tell: do not start another
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# ---------------------------------------------------------------- status and stop


def _ours(pid: int) -> bool:
    from runtime.local_server import _cmdline

    return MARKER in _cmdline(pid)


def _state(where: dict[str, Path]) -> dict[str, Any] | None:
    try:
        state = json.loads(where["json"].read_text())
        return {"pid": int(state["pid"]), "started": float(state["started"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


_COMMAND_ENV: dict[str, str] = {}


def remember_environment() -> None:
    """Keep the environment as the command got it (`flows.cli.main`, before the defaults of
    `runtime.settings.apply_environment`): the key `status` and `stop` look for."""
    _COMMAND_ENV.clear()
    _COMMAND_ENV.update(os.environ)


def status(env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, Any]:
    """The daemon this environment and folder would use: running, pid, socket, idle (default:
    the command's environment, `remember_environment`)."""
    env = dict((_COMMAND_ENV or os.environ) if env is None else env)
    folder = socket_dir(create=False)
    info: dict[str, Any] = {"warm_enabled": enabled(env), "warm_running": False,
                            "warm_pid": None, "warm_socket": None,
                            "warm_idle_seconds": idle_seconds(env)}  # fmt: skip
    if folder is None:
        return info
    where = paths(folder, key(env, os.getcwd() if cwd is None else cwd))
    state = _state(where)
    if state and _ours(state["pid"]) and where["sock"].exists():
        info.update(warm_running=True, warm_pid=state["pid"], warm_socket=str(where["sock"]))
    return info


def stop(env: Mapping[str, str] | None = None, cwd: str | None = None) -> int | None:
    """Stop the daemon this environment would use (its running commands finish); its pid."""
    from runtime.local_server import _terminate

    info = status(env, cwd)
    if not info["warm_running"]:
        return None
    _terminate(int(info["warm_pid"]), ours=_ours)
    return int(info["warm_pid"])

"""The lab of the warm command server's tests (tests/flows/test_warm_cli*.py): a working folder,
a home and a private socket folder per test, the console script run warm or in-process, the
daemons found by their state files and logs and killed by pid at the end; a file lock keeps the
test that touches a module (which makes every daemon stale) apart from the others."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from runtime import warm

GREYLAB = str(Path(sys.executable).parent / "greylab")
ROOT = Path(__file__).resolve().parents[2]
#: the daemon's preload took 7-11 s on this 2-core machine at load 3-4; far above that
READY_S = 240.0


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Lab:
    """A working folder, a home and a private socket folder; `run` calls the console script."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "lab"
        self.cwd.mkdir()
        self.run_dir = root / "run"
        self.run_dir.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "MLFLOW_", "GREYLAB_"))}  # fmt: skip
        env.update(
            GREYLAB_HOME=str(root / "home"), GREYLAB_WARM="1", GREYLAB_WARM_IDLE="300",
            GREYLAB_SERVER_IDLE="0", XDG_RUNTIME_DIR=str(self.run_dir),
            PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL="CRITICAL",
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
        )  # fmt: skip
        self.env = env

    @property
    def sockets(self) -> Path:
        return self.run_dir / "greylab"

    def run(self, *args: str, warm_on: bool = True, timeout: float = 600, **env: str,
            ) -> subprocess.CompletedProcess[str]:  # fmt: skip
        full = {**self.env, **env, "GREYLAB_WARM": "1" if warm_on else "0"}
        return subprocess.run([GREYLAB, *args], cwd=self.cwd, env=full, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    def status(self, **env: str) -> dict[str, object]:
        with _environ({**self.env, **env}):
            return warm.status({**self.env, **env}, str(self.cwd))

    def wait_ready(self, **env: str) -> int:
        """Start the daemon of this environment (a first call) and wait until it serves."""
        deadline = time.monotonic() + READY_S
        asked = 0.0
        while time.monotonic() < deadline:
            info = self.status(**env)
            if info["warm_running"]:
                return int(info["warm_pid"])  # type: ignore[call-overload]
            if time.monotonic() - asked > 30:  # (again: a daemon may have found itself stale)
                self.run("--help", **env)  # type: ignore[arg-type]
                asked = time.monotonic()
            time.sleep(0.2)
        raise AssertionError(f"no warm daemon within {READY_S} s: {self.logs()}")

    def logs(self) -> str:
        return "".join(p.read_text() for p in sorted(self.sockets.glob("*.log")))

    def children(self) -> int:
        return self.logs().count(": child ")

    def daemons(self) -> list[int]:
        pids = []
        for state in self.sockets.glob("warm-*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                pids.append(int(json.loads(state.read_text())["pid"]))
        return pids


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


#: held shared by every warm test's lab, exclusively by the one that touches a module
TESTS_LOCK = Path(tempfile.gettempdir()) / "greylab-warm-tests.lock"


@contextlib.contextmanager
def _tests_lock(exclusive: bool) -> Iterator[None]:
    fd = os.open(TESTS_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + 1200  # bounded: the longest warm test takes about 1 min
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{TESTS_LOCK} held for 20 min"
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def lab_context(exclusive: bool = False) -> Iterator[Lab]:
    """A lab whose daemons are killed by pid at the end (also tests/flows/test_warm_cli_private.py)."""
    with _tests_lock(exclusive), _lab() as the_lab:
        yield the_lab


@contextlib.contextmanager
def _lab() -> Iterator[Lab]:
    # short: a Unix socket path has at most 107 bytes (pytest's tmp_path can be longer)
    root = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp"))
    the_lab = Lab(root)
    seen: set[int] = set()
    try:
        yield the_lab
    finally:
        seen.update(the_lab.daemons())
        for line in the_lab.logs().splitlines():  # daemons whose state file is gone too
            with contextlib.suppress(ValueError, IndexError):
                seen.add(int(line.split("warm[", 1)[1].split("]", 1)[0]))
        for pid in seen:
            if _alive(pid) and warm.MARKER in _cmdline(pid):
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""

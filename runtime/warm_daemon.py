"""The warm command server's daemon and its children (`runtime.warm` has the design, the
client, status and stop): `python -P -m runtime.warm_daemon serve SOCKET PRELOAD ENTRY`.

The daemon runs `PRELOAD` (imports, no threads), listens on `SOCKET` and forks a child per
request after checking the peer's uid and that nothing it was built from changed; the child
takes over the client's descriptors, environment, folder and argv, waits for the client's
"go", runs `ENTRY` and reports its exit code (`report_exit`, the last thing before
`os._exit`). Single-threaded: a poll loop over the listener, SIGCHLD (wakeup fd) and the
clients' hang-ups.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from runtime.warm import _HEADER, CWD_FILES, PROTOCOL, ROOT, _Lines, idle_seconds, key


def fingerprint(extra: list[Path]) -> dict[str, tuple[int, int]]:
    """Size and mtime of the files the daemon's state was built from (absent: (-1, -1))."""
    files = set(extra)
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if name and name.startswith(str(ROOT) + os.sep):
            files.add(Path(name))
    for where in {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}:
        files.add(Path(where))
    out = {}
    for path in files:
        try:
            info = os.stat(path)
            out[str(path)] = (info.st_size, info.st_mtime_ns)
        except OSError:
            out[str(path)] = (-1, -1)
    return out


def _settings_files() -> list[Path]:
    prefect_home = os.environ.get("PREFECT_HOME")
    files = [Path(os.getcwd()) / name for name in CWD_FILES]
    if prefect_home:
        files.append(Path(prefect_home) / "profiles.toml")
    return files


class Daemon:
    """The fork server (single-threaded): `preload` imports, then `serve` until idle."""

    def __init__(self, sock_path: Path, preload: str, entry: str) -> None:
        self.sock_path, self.preload, self.entry = sock_path, preload, entry
        self.where = {n: sock_path.with_suffix("." + n) for n in ("sock", "lock", "json", "log")}
        self.children: dict[int, socket.socket] = {}
        self.stopping = False

    def main(self) -> int:
        self.digest = key(os.environ, os.getcwd())  # before the preload changes anything
        self.lock = os.open(self.where["lock"], os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another daemon of this key
        self.idle = idle_seconds()
        started = time.perf_counter()
        _call(self.preload)
        import gc

        gc.collect()
        gc.freeze()  # the preloaded objects: never scanned by a child's collector, whose every
        # scan would otherwise write to (and so copy) each page of them after the fork
        import threading

        if threading.active_count() != 1:
            _log(f"the preload started threads {threading.enumerate()}: not serving")
            return 1
        self.files = _settings_files()
        self.built = fingerprint(self.files)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        tmp = self.where["sock"].with_name(self.where["sock"].name + f".{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        old = os.umask(0o177)
        try:
            listener.bind(str(tmp))
        finally:
            os.umask(old)
        os.chmod(tmp, 0o600)
        listener.listen(16)
        state = self.where["json"].with_name(self.where["json"].name + f".{os.getpid()}")
        state.write_text(json.dumps({"pid": os.getpid(), "started": time.time()}))
        os.chmod(state, 0o600)
        state.replace(self.where["json"])
        tmp.replace(self.where["sock"])  # atomically: clients see a ready daemon or none
        self.inode = os.stat(self.where["sock"]).st_ino
        _log(f"serving {self.where['sock']} (preload {time.perf_counter() - started:.2f} s)")
        try:
            self.loop(listener)
        finally:
            self.unlink()
            listener.close()
        return 0

    def unlink(self) -> None:
        """Remove the socket and state if they are still this daemon's."""
        with contextlib.suppress(OSError):
            if os.stat(self.where["sock"]).st_ino == self.inode:
                self.where["sock"].unlink()
                self.where["json"].unlink()

    def loop(self, listener: socket.socket) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        last = time.monotonic()
        while not self.stopping:
            for fd, _mask in poller.poll(1000):
                if fd == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 512)
                elif fd == listener.fileno():
                    conn, _ = listener.accept()
                    outcome = self.handle(conn, listener, (wake_r, wake_w))
                    if outcome == "stale":
                        self.stopping = True
                    elif outcome == "forked":
                        poller.register(conn, select.POLLRDHUP)
                    last = time.monotonic()
                else:  # a client hung up: its child goes too (SIGTERM, as on a terminal)
                    with contextlib.suppress(KeyError, ValueError):
                        poller.unregister(fd)
                    for pid, conn in list(self.children.items()):
                        if conn.fileno() == fd:
                            with contextlib.suppress(OSError):
                                os.kill(pid, signal.SIGTERM)
            self.reap(poller)
            if self.children:
                last = time.monotonic()
            elif time.monotonic() - last > self.idle:
                _log(f"idle for {self.idle:g} s: stopping")
                break

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def reap(self, poller: select.poll) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError, KeyError, ValueError):
                poller.unregister(conn.fileno())
            if os.WIFSIGNALED(status):
                message = f"signal {os.WTERMSIG(status)}\n"
            else:
                message = f"exit {os.waitstatus_to_exitcode(status)}\n"
            with contextlib.suppress(OSError):  # the child has usually said it already
                conn.sendall(message.encode())
            conn.close()

    def handle(self, conn: socket.socket, listener: socket.socket, wake: tuple[int, int]) -> str:
        fds: list[int] = []
        try:
            if not peer_allowed(conn):
                conn.close()
                return "refused"
            conn.settimeout(10.0)
            header, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
            if len(header) != _HEADER.size or len(fds) != 3:
                raise ValueError("bad request")
            (size,) = _HEADER.unpack(header)
            data = b""
            while len(data) < size:
                chunk = conn.recv(min(1 << 20, size - len(data)))
                if not chunk:
                    raise ValueError("short request")
                data += chunk
            request = json.loads(data.decode("utf-8", "surrogateescape"))
            if request.get("v") != PROTOCOL or request.get("key") != self.digest:
                conn.sendall(b"refused key\n")
                conn.close()
                return "refused"
            now = fingerprint(self.files)
            if now != self.built:
                changed = sorted(k for k in now.keys() | self.built.keys()
                                 if now.get(k) != self.built.get(k))  # fmt: skip
                _log(f"stale, stopping: changed since the start: {', '.join(changed[:5])}")
                self.unlink()
                os.close(self.lock)  # the client starts a fresh daemon at once
                conn.sendall(b"stale\n")
                conn.close()
                return "stale"
        except (OSError, ValueError) as exc:
            _log(f"bad request: {exc}")
            for fd in fds:
                os.close(fd)
            conn.close()
            return "refused"
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                signal.set_wakeup_fd(-1)
                listener.close()
                for other in self.children.values():
                    other.close()
                for fd in (*wake, self.lock):  # the lock stays the daemon's alone
                    os.close(fd)
                _child(conn, fds, request, self.entry)
            finally:
                os._exit(1)
        for fd in fds:  # the command's descriptors live in its child only
            os.close(fd)
        self.children[pid] = conn
        _log(f"child {pid}: {' '.join(map(str, request['argv'][1:3]))[:80]}")
        return "forked"


def peer_allowed(conn: socket.socket) -> bool:
    """Whether the peer of a Unix socket runs as this process's user (`SO_PEERCRED`)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


_REPORT: list[socket.socket] = []


def report_exit(code: int) -> None:
    """In a warm child: tell the client the exit code (the last thing before `os._exit`);
    elsewhere nothing."""
    while _REPORT:
        conn = _REPORT.pop()
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}\n".encode())


def _child(conn: socket.socket, fds: list[int], request: dict[str, Any], entry: str) -> None:
    signal.set_wakeup_fd(-1)
    for sig, handler in ((signal.SIGCHLD, signal.SIG_DFL), (signal.SIGTERM, signal.SIG_DFL),
                         (signal.SIGINT, signal.default_int_handler)):  # fmt: skip
        signal.signal(sig, signal.SIG_IGN if sig in request.get("ignored", ()) else handler)
    conn.settimeout(None)
    reader = _Lines(conn)
    try:
        conn.sendall(f"started {os.getpid()}\n".encode())
        if reader.line() != "go":  # the client gave up: it runs the command itself
            os._exit(0)
    except OSError:
        os._exit(0)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for stream in (sys.stdin, sys.stdout, sys.stderr):  # line-buffered on a terminal, as at start
        with contextlib.suppress(Exception):
            stream.reconfigure(line_buffering=stream.isatty() or stream is sys.stderr)  # type: ignore[union-attr]
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = list(request["argv"])
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # legacy global state: fresh, as in a new process
    _REPORT.append(conn)
    _profile(os.environ.get(PROFILE_ENV))
    if os.environ.get(STACKS_ENV):  # a diagnostic: SIGUSR1 prints every thread's stack
        import faulthandler

        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    code = 1
    try:
        result = _call(entry)
        code = result if isinstance(result, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            sys.stderr.write(f"{exc.code}\n")
    except BaseException:  # as the interpreter would: a traceback and exit 1
        import traceback

        traceback.print_exc()
    import atexit

    atexit._run_exitfuncs()  # the CLI's last handler reports and leaves with os._exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    report_exit(code)
    os._exit(code)


#: a path: each child writes its cProfile statistics to `<path>.<pid>` (a diagnostic of
#: benchmarks/cli_overhead.py; as a GREYLAB_ variable it gets a daemon of its own)
PROFILE_ENV = "GREYLAB_WARM_PROFILE"
STACKS_ENV = "GREYLAB_WARM_STACKS"  # set: a warm child prints its threads' stacks on SIGUSR1


def _profile(path: str | None) -> None:
    if not path:
        return
    import atexit
    import cProfile

    profile = cProfile.Profile()

    def dump() -> None:  # registered after the CLI's last handler: runs before it
        profile.disable()
        profile.dump_stats(f"{path}.{os.getpid()}")

    atexit.register(dump)
    profile.enable()


def _call(spec: str) -> Any:
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)()


def _log(text: str) -> None:
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} warm[{os.getpid()}]: {text}\n")
        sys.stderr.flush()


def serve(sock_path: str, preload: str, entry: str) -> int:
    """The daemon's main (`python -P -m runtime.warm_daemon serve SOCKET PRELOAD ENTRY`)."""
    return Daemon(Path(sock_path), preload, entry).main()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "serve":
        from runtime import warm_daemon as this  # one module: `report_exit` is called as its

        with contextlib.suppress(KeyboardInterrupt):
            raise SystemExit(this.serve(*sys.argv[2:]))
    raise SystemExit(errno.EINVAL)

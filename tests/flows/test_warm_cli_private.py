"""The warm command server is private to its user (`runtime.warm`, issue 31): its folder 0700,
its socket 0600, a process of another uid refused by the folder and, behind it, by the
daemon's `SO_PEERCRED` check. The foreign uid needs root here (`setuid`); elsewhere those parts
are skipped (the permission checks still run)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import warm_daemon
from tests.flows.warm_lab import Lab, lab_context

pytestmark = pytest.mark.slow


@pytest.fixture
def lab() -> Iterator[Lab]:
    with lab_context() as the_lab:
        yield the_lab


def test_the_socket_is_private_to_its_user(lab: Lab) -> None:
    lab.wait_ready()
    (sock,) = lab.sockets.glob("warm-*.sock")
    assert oct(os.stat(lab.sockets).st_mode & 0o777) == oct(0o700)
    assert oct(os.stat(sock).st_mode & 0o777) == oct(0o600)
    for state in lab.sockets.iterdir():
        assert os.stat(state).st_mode & 0o077 == 0, state
    if os.getuid() != 0:
        pytest.skip("a foreign uid needs root here (setuid); the uid check is SO_PEERCRED")
    assert _connect_as_nobody(str(sock)) == "PermissionError"


def _connect_as_nobody(path: str) -> str:
    """Connect to `path` from a child running as uid/gid 65534; the outcome's name."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        outcome = "connected"
        try:
            os.setgid(65534)
            os.setuid(65534)
            import socket as s

            with s.socket(s.AF_UNIX, s.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(path)
                outcome = "connected:" + sock.recv(100).decode()
        except BaseException as exc:
            outcome = type(exc).__name__
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as answer:
        return answer.read()


def test_the_daemon_serves_only_its_own_uid() -> None:
    """`SO_PEERCRED` behind the folder's permissions: a listener in an open folder sees a
    foreign peer refused and its own uid allowed (the check the daemon makes per connection)."""
    import socket

    if os.getuid() != 0:
        pytest.skip("a foreign uid needs root here (setuid)")
    root = Path(tempfile.mkdtemp(prefix="gwp", dir="/tmp"))
    try:
        os.chmod(root, 0o777)
        path = str(root / "s")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            os.chmod(path, 0o777)
            listener.listen(2)
            listener.settimeout(30)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                        sock.connect(path)
                        os.read(read, 1)  # hold the connection until the check is made
                finally:
                    os._exit(0)
            conn, _ = listener.accept()
            with conn:
                assert warm_daemon.peer_allowed(conn) is False
            os.write(write, b"x")
            os.waitpid(pid, 0)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mine:
                mine.connect(path)
                conn, _ = listener.accept()
                with conn:
                    assert warm_daemon.peer_allowed(conn) is True
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)

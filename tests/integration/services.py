"""Real local services for integration tests: started on 127.0.0.1, waited for with bounded
loops, stopped by the test (fixture) that started them, by process group id; a service also
ends when the test process dies without stopping it (killed by a time limit: `with_parent`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

BIN = Path(sys.executable).parent


#: run a command with the Linux parent-death signal set: SIGTERM when the process that started
#: it (pytest, an xdist worker) dies, even by SIGKILL (the signal survives the exec)
_PARENT_DEATH = ("import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0); "
                 "os.getppid() == int(sys.argv[1]) or os._exit(1); os.execvp(sys.argv[2], sys.argv[2:])")  # fmt: skip


def with_parent(argv: list[str]) -> list[str]:
    """`argv` that ends when this process dies (Linux; elsewhere as it is)."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-c", _PARENT_DEATH, str(os.getpid()), *argv]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, *, timeout: float, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited early ({process.returncode}):\n{log.read_text()}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        time.sleep(0.5)
    raise TimeoutError(f"{url} not ready after {timeout} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen, *, grace: float = 15.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after `grace` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def service(
    argv: list[str], *, health: str, log: Path, env: dict[str, str], timeout: float = 120.0
) -> Iterator[subprocess.Popen]:
    with log.open("wb") as sink:
        process = subprocess.Popen(
            with_parent(argv), stdout=sink, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_http(health, timeout=timeout, process=process, log=log)
        yield process
    finally:
        stop(process)


def mlflow_server(tmp: Path) -> contextlib.AbstractContextManager[str]:
    """A real `mlflow server` (SQLite backend, local artifact root); yields its URI."""

    @contextlib.contextmanager
    def run() -> Iterator[str]:
        port = free_port()
        uri = f"http://127.0.0.1:{port}"
        argv = [
            str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
            "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
            "--artifacts-destination", str(tmp / "artifacts"), "--workers", "2",
        ]  # fmt: skip
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with service(argv, health=f"{uri}/health", log=tmp / "mlflow.log", env=env):
            yield uri

    return run()


def prefect_server(tmp: Path, *, ui: bool = False) -> contextlib.AbstractContextManager[str]:
    """A real `prefect server start` (SQLite in `tmp`; with its web UI if `ui`, at the API
    URL without `/api`); yields its API URL."""

    @contextlib.contextmanager
    def run() -> Iterator[str]:
        port = free_port()
        api = f"http://127.0.0.1:{port}/api"
        env = {
            **os.environ,
            "PREFECT_HOME": str(tmp / "prefect-home"),
            "PREFECT_API_URL": "",
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(port),
            "PREFECT_UI_ENABLED": "true" if ui else "false",
            "PREFECT_UI_API_URL": api,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }
        argv = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                "--port", str(port), *([] if ui else ["--no-ui"])]  # fmt: skip
        with service(argv, health=f"{api}/ready", log=tmp / "prefect.log", env=env):
            yield api

    return run()


# -- the production topology (docker-compose.yml) without Docker ---------------------------------

POSTGRES_BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)


def postgres_bin(name: str) -> str | None:
    """A PostgreSQL program from PATH or the Debian location of version 15."""
    import shutil

    for folder in POSTGRES_BIN_DIRS:
        if (folder / name).is_file():
            return str(folder / name)
    return shutil.which(name)


def unprivileged_user() -> tuple[int, int] | str:
    """(uid, gid) to run PostgreSQL as (it refuses to run as root), or the reason there is none.

    Not root: the current user. Root: `nobody`, or a system user `greylab-pg` created with
    `useradd` when `nobody` is missing."""
    import pwd
    import shutil

    if os.geteuid() != 0:
        return os.geteuid(), os.getegid()
    for name in ("nobody", "greylab-pg"):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    made = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "greylab-pg"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if made.returncode != 0:
        return f"running as root, no user 'nobody' and useradd failed: {made.stderr.strip()}"
    entry = pwd.getpwnam("greylab-pg")
    return entry.pw_uid, entry.pw_gid


class Postgres:
    """A running PostgreSQL server on 127.0.0.1 (see `postgres_server`)."""

    def __init__(self, port: int, superuser: str, password: str) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self.superuser = superuser
        self.password = password

    def url(self, user: str, password: str, database: str, scheme: str = "postgresql") -> str:
        return f"{scheme}://{user}:{password}@{self.host}:{self.port}/{database}"

    def query(self, sql: str, *, database: str = "postgres", user: str | None = None,
              password: str | None = None) -> list[tuple]:  # fmt: skip
        import psycopg2

        connection = psycopg2.connect(
            host=self.host, port=self.port, dbname=database, user=user or self.superuser,
            password=password if user else self.password, connect_timeout=5,
        )  # fmt: skip
        try:
            with connection, connection.cursor() as cursor:
                cursor.execute(sql)
                return cursor.fetchall() if cursor.description else []
        finally:
            connection.close()


def postgres_server(
    tmp: Path, user: tuple[int, int], *, timeout: float = 60.0
) -> contextlib.AbstractContextManager[Postgres]:
    """A real PostgreSQL server run as `user` (uid, gid) in a private temporary folder, TCP on
    127.0.0.1 only (no Unix socket), password (SCRAM) authentication for everyone; the log is
    copied to `tmp/postgres.log`. Stopped by fast shutdown (SIGINT to its process group)."""

    @contextlib.contextmanager
    def run() -> Iterator[Postgres]:
        import secrets
        import shutil
        import tempfile

        uid, gid = user
        # Not under `tmp`: pytest's folders are private to root, the server's user must own its.
        base = Path(tempfile.mkdtemp(prefix="greylab-pg-"))
        os.chown(base, uid, gid)
        data, log = base / "data", base / "postgres.log"
        password = secrets.token_hex(16)
        (base / "pwfile").write_text(password + "\n")
        os.chown(base / "pwfile", uid, gid)
        env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "HOME": str(base)}
        port = free_port()
        process = None
        try:
            initdb = subprocess.run(
                [postgres_bin("initdb") or "initdb", "-D", str(data), "-U", "postgres",
                 "--pwfile", str(base / "pwfile"), "--auth", "scram-sha-256", "-E", "UTF8",
                 "--locale", "C", "--no-sync"],
                capture_output=True, text=True, timeout=120, check=False,
                user=uid, group=gid, extra_groups=[], env=env, cwd=base,
            )  # fmt: skip
            if initdb.returncode != 0:
                raise RuntimeError(f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}")
            with open(log, "wb") as sink:
                process = subprocess.Popen(
                    [postgres_bin("postgres") or "postgres", "-D", str(data),
                     "-c", "listen_addresses=127.0.0.1", "-c", f"port={port}",
                     "-c", "unix_socket_directories=", "-c", "fsync=off",
                     "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                     "-c", "max_connections=200"],
                    stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                    user=uid, group=gid, extra_groups=[], env=env, cwd=base,
                )  # fmt: skip
            server = Postgres(port, "postgres", password)
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"postgres exited ({process.returncode}):\n{log.read_text()}"
                    )
                try:
                    server.query("select 1")
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"postgres not ready:\n{log.read_text()[-3000:]}"
                        ) from None
                    time.sleep(0.3)
            yield server
        finally:
            if process is not None:
                _stop_postgres(process)
            with contextlib.suppress(OSError):
                shutil.copyfile(log, tmp / "postgres.log")
            shutil.rmtree(base, ignore_errors=True)

    return run()


def _stop_postgres(process: subprocess.Popen) -> None:
    """Fast shutdown (SIGINT: disconnect clients, checkpoint), SIGKILL after a bound."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

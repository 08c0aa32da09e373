"""Real local services for integration tests: started on 127.0.0.1, waited for with bounded
loops, stopped by the test (fixture) that started them, by process group id."""

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
            argv, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
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


def prefect_server(tmp: Path) -> contextlib.AbstractContextManager[str]:
    """A real `prefect server start` (SQLite in `tmp`); yields its API URL."""

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
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }
        argv = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                "--port", str(port), "--no-ui"]  # fmt: skip
        with service(argv, health=f"{api}/ready", log=tmp / "prefect.log", env=env):
            yield api

    return run()

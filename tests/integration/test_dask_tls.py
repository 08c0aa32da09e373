"""The compose stack's Dask cluster speaks mutual TLS (deployments/docker/dask_certs.py): with
the certificates a client runs work; without them, or over plain TCP, it is refused. A real
scheduler and worker on 127.0.0.1, configured by the same environment variables as compose."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.services import free_port, stop

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.integration


def tls_env(folder: Path) -> dict[str, str]:
    """The `x-dask-tls` block of docker-compose.yml, with this test's folder for /tls."""
    return {
        "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
        "DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME": "tls",
        "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(folder / "ca.pem"),
        "DASK_DISTRIBUTED__COMM__TLS__SCHEDULER__CERT": str(folder / "cluster.pem"),
        "DASK_DISTRIBUTED__COMM__TLS__SCHEDULER__KEY": str(folder / "cluster-key.pem"),
        "DASK_DISTRIBUTED__COMM__TLS__WORKER__CERT": str(folder / "cluster.pem"),
        "DASK_DISTRIBUTED__COMM__TLS__WORKER__KEY": str(folder / "cluster-key.pem"),
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(folder / "cluster.pem"),
        "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(folder / "cluster-key.pem"),
    }


def client_script(address: str) -> str:
    return (
        "from distributed import Client\n"
        f"with Client({address!r}, timeout=8) as c:\n"
        "    print('sum', c.submit(sum, [1, 2, 3]).result(timeout=30))\n"
    )


def test_dask_cluster_accepts_only_clients_with_the_cluster_certificate(tmp_path: Path) -> None:
    tls = tmp_path / "tls"
    done = subprocess.run(
        [sys.executable, str(ROOT / "deployments/docker/dask_certs.py"), str(tls)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert (tls / "cluster-key.pem").stat().st_mode & 0o077 == 0  # the key is private
    first = (tls / "ca.pem").read_bytes()
    subprocess.run([sys.executable, str(ROOT / "deployments/docker/dask_certs.py"), str(tls)],
                   capture_output=True, timeout=60, check=True)  # fmt: skip
    assert (tls / "ca.pem").read_bytes() == first, done.stdout  # a rerun keeps the identity

    env = {**os.environ, **tls_env(tls)}
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    log = (tmp_path / "dask.log").open("wb")
    scheduler = subprocess.Popen(
        [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--no-dashboard"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    worker = None
    try:
        time.sleep(1.0)
        worker = subprocess.Popen(
            [str(BIN / "dask"), "worker", address, "--nworkers", "1", "--nthreads", "1",
             "--no-dashboard", "--host", "127.0.0.1"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

        def run_client(extra_env: dict[str, str], target: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-c", client_script(target)],
                env=extra_env, capture_output=True, text=True, timeout=90,
            )  # fmt: skip

        ok = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # bounded: scheduler and worker start up
            ok = run_client(env, address)
            if ok.returncode == 0:
                break
            time.sleep(1.0)
        assert ok is not None and ok.returncode == 0, ok.stderr[-2000:] if ok else ""
        assert "sum 6" in ok.stdout

        plain = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
        no_cert = run_client(plain, address)  # TLS without the cluster certificate
        assert no_cert.returncode != 0
        assert "sum 6" not in no_cert.stdout
        over_tcp = run_client(plain, f"tcp://127.0.0.1:{port}")  # no TLS at all
        assert over_tcp.returncode != 0
    finally:
        if worker is not None:
            stop(worker, grace=10)
        stop(scheduler, grace=10)
        log.close()

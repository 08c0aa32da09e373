"""The production topology of docker-compose.yml, for real and without Docker: one PostgreSQL 15
server (run as an unprivileged user) with a database and role per service, initialised by the
compose init script; a Prefect server on it (API auth string on); an MLflow tracking server on
it with basic auth (user store in PostgreSQL too), started through the compose entrypoint; a
non-admin MLflow account for the worker created by the compose `mlflow-init` script; a process
worker polling the work pool; the deployments of deployments/prefect.yaml registered as the
`prefect-deploy` service does; one deployment run through the API; its MLflow runs read back
with the worker's credentials. Everything on 127.0.0.1, bounded waits, every process stopped
by its process group."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.services import (
    BIN,
    Postgres,
    free_port,
    postgres_bin,
    postgres_server,
    service,
    unprivileged_user,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "deployments" / "docker"
POOL = "greylab-process"
WORKER = "greylab-worker"  # the non-admin MLflow account of the worker
SECRETS = ("prefect_db", "mlflow_db", "prefect_api", "admin", "worker", "flask")


def _status(url: str, auth: tuple[str, str] | None = None) -> int:
    import base64

    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@dataclass(frozen=True)
class _Topology:
    """One run of the stack: its folder, the PostgreSQL server, the generated secrets, the
    service addresses on 127.0.0.1 and the environment of each kind of process."""

    tmp: Path
    pg: Postgres
    secret: dict[str, str]
    prefect_port: int
    mlflow_port: int
    health_port: int
    api: str
    tracking: str
    base_env: dict[str, str]  # the test's environment without inherited credentials
    server_env: dict[str, str]  # the Prefect server
    mlflow_env: dict[str, str]  # the MLflow server
    client_env: dict[str, str]  # the worker and the deploy and trigger clients


def _postgres_user() -> tuple[int, int]:
    """The unprivileged user to run PostgreSQL as; skips without PostgreSQL or such a user."""
    for program in ("initdb", "postgres", "psql"):
        if postgres_bin(program) is None:
            pytest.skip(f"PostgreSQL program {program} not installed")
    user = unprivileged_user()
    if isinstance(user, str):
        pytest.skip(user)
    return user


def _init_databases(pg: Postgres, secret: dict[str, str]) -> None:
    """The compose init script, for real (psql over TCP as the superuser)."""
    init = subprocess.run(
        ["sh", str(DOCKER / "postgres-init.sh")],
        env={**os.environ, "PGHOST": pg.host, "PGPORT": str(pg.port),
             "PGPASSWORD": pg.password, "POSTGRES_USER": pg.superuser,
             "PREFECT_DB_PASSWORD": secret["prefect_db"],
             "MLFLOW_DB_PASSWORD": secret["mlflow_db"],
             "PATH": f"{Path(postgres_bin('psql') or 'psql').parent}:{os.environ['PATH']}"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
    # separate roles: the prefect role cannot open the mlflow databases
    with pytest.raises(Exception, match="permission denied"):
        pg.query("select 1", database="mlflow", user="prefect", password=secret["prefect_db"])


def _topology(tmp_path: Path, pg: Postgres, secret: dict[str, str]) -> _Topology:
    """Free ports and the environments of servers and clients, wired as in the compose file."""
    prefect_port, mlflow_port, health_port = free_port(), free_port(), free_port()
    api = f"http://127.0.0.1:{prefect_port}/api"
    tracking = f"http://127.0.0.1:{mlflow_port}"
    auth_string = f"greylab:{secret['prefect_api']}"
    base_env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "PREFECT_API_KEY"):
        base_env.pop(key, None)
    server_env = {
        **base_env,
        "PREFECT_API_URL": "",
        "PREFECT_API_DATABASE_CONNECTION_URL": pg.url(
            "prefect", secret["prefect_db"], "prefect", scheme="postgresql+asyncpg"
        ),
        "PREFECT_SERVER_API_AUTH_STRING": auth_string,
        "PREFECT_UI_ENABLED": "false",
    }
    mlflow_env = {
        **base_env,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secret["flask"],
        "MLFLOW_AUTH_ADMIN_USERNAME": "admin",
        "MLFLOW_AUTH_ADMIN_PASSWORD": secret["admin"],
        "MLFLOW_AUTH_DATABASE_URI": pg.url(
            "mlflow", secret["mlflow_db"], "mlflow_auth", scheme="postgresql+psycopg2"
        ),
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini"),
    }
    client_env = {
        **base_env,
        "PREFECT_API_URL": api,
        "PREFECT_API_AUTH_STRING": auth_string,
        "MLFLOW_TRACKING_URI": tracking,
        "MLFLOW_TRACKING_USERNAME": WORKER,
        "MLFLOW_TRACKING_PASSWORD": secret["worker"],
        "GREYLAB_HOME": str(tmp_path / "greylab-home"),
        "GREYLAB_DATA_ROOT": str(tmp_path / "data"),
        "GREYLAB_PROJECT_DIR": str(ROOT),
    }
    return _Topology(tmp_path, pg, secret, prefect_port, mlflow_port, health_port, api, tracking,
                     base_env, server_env, mlflow_env, client_env)  # fmt: skip


@contextlib.contextmanager
def _servers(top: _Topology) -> Iterator[None]:
    """The Prefect server and the MLflow server (through the compose entrypoint), both on
    PostgreSQL, running until the context ends."""
    prefect_argv = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                    "--port", str(top.prefect_port), "--no-ui"]  # fmt: skip
    backend = top.pg.url("mlflow", top.secret["mlflow_db"], "mlflow", scheme="postgresql+psycopg2")
    mlflow_argv = [
        "sh", str(DOCKER / "mlflow-entrypoint.sh"), sys.executable, "-m",
        "deployments.mlflow_ui", "server", "--app-name", "basic-auth",  # compose's command
        "--host", "127.0.0.1", "--port", str(top.mlflow_port),
        "--backend-store-uri", backend,
        "--artifacts-destination", str(top.tmp / "artifacts"), "--workers", "2",
    ]  # fmt: skip
    with (
        service(prefect_argv, health=f"{top.api}/ready", log=top.tmp / "prefect.log",
                env=top.server_env, timeout=150),
        service(mlflow_argv, health=f"{top.tracking}/health", log=top.tmp / "mlflow.log",
                env=top.mlflow_env, timeout=150),
    ):  # fmt: skip
        yield


def _assert_state_in_postgres_and_auth_on(top: _Topology) -> None:
    """The servers' schemas are in PostgreSQL, and neither answers without credentials."""
    # both servers keep their state in their own PostgreSQL database
    assert top.pg.query("select count(*) from alembic_version", database="prefect")
    assert top.pg.query("select count(*) from alembic_version", database="mlflow")
    assert top.pg.query("select count(*) from alembic_version_auth", database="mlflow_auth")
    # auth is on: no credential, no API
    assert _status(f"{top.api}/flows/filter") in (401, 405)
    assert _status(f"{top.tracking}/api/2.0/mlflow/experiments/search?max_results=1") == 401


def _create_worker_account(top: _Topology) -> tuple[str, str]:
    """The compose mlflow-init step: a non-admin worker account; returns its credentials."""
    made = subprocess.run(
        [sys.executable, str(DOCKER / "mlflow_users.py")],
        env={**top.base_env, "MLFLOW_TRACKING_URI": top.tracking,
             "MLFLOW_ADMIN_USERNAME": "admin", "MLFLOW_ADMIN_PASSWORD": top.secret["admin"],
             "MLFLOW_WORKER_USERNAME": WORKER,
             "MLFLOW_WORKER_PASSWORD": top.secret["worker"]},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert top.secret["worker"] not in made.stdout + made.stderr
    worker_auth = (WORKER, top.secret["worker"])
    assert _status(f"{top.tracking}/api/2.0/mlflow/users/get?username=admin", worker_auth) == 403
    rows = top.pg.query(
        f"select is_admin from users where username = '{WORKER}'", database="mlflow_auth"
    )
    assert rows == [(False,)]
    return worker_auth


def _worker(top: _Topology) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """A process worker polling the work pool (health endpoint on ``top.health_port``)."""
    worker_argv = [str(BIN / "prefect"), "worker", "start", "--pool", POOL,
                   "--type", "process", "--with-healthcheck"]  # fmt: skip
    worker_env = {
        **top.client_env,
        "PREFECT_WORKER_WEBSERVER_HOST": "127.0.0.1",
        "PREFECT_WORKER_WEBSERVER_PORT": str(top.health_port),
        "PREFECT_WORKER_QUERY_SECONDS": "2",
    }
    return service(worker_argv, health=f"http://127.0.0.1:{top.health_port}/health",
                   log=top.tmp / "worker.log", env=worker_env, timeout=120)  # fmt: skip


def _deploy_and_run(top: _Topology) -> None:
    """The compose prefect-deploy step (one deployment of deployments/prefect.yaml), then one
    run of it through the API, which the worker completes."""
    deploy = subprocess.run(
        [str(BIN / "prefect"), "--no-prompt", "deploy", "--name",
         "inverse-simulation", "--prefect-file", "deployments/prefect.yaml"],
        cwd=ROOT, env=top.client_env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert deploy.returncode == 0, deploy.stdout[-3000:] + deploy.stderr[-3000:]
    study = {"systems": ["two_mass"], "dt": 0.01, "t_end": 1.0,
             "forward_check": False, "experiment": "topology-check"}  # fmt: skip
    code = (
        "import json, sys\n"
        "from deployments.runs import run_deployment  # some settings only: the flow's defaults\n"
        "run = run_deployment('inverse-simulation/inverse-simulation', timeout=180,\n"
        f"    parameters={{'study': json.loads({json.dumps(json.dumps(study))})}})\n"
        "print(run.state.type.value)\n"
    )
    trigger = subprocess.run(
        [sys.executable, "-c", code], env=top.client_env, capture_output=True,
        text=True, timeout=240, check=False,
    )  # fmt: skip
    worker_log = (top.tmp / "worker.log").read_text()[-4000:]
    assert trigger.stdout.strip().endswith("COMPLETED"), (
        trigger.stdout + trigger.stderr[-3000:] + worker_log
    )


def _child_run_read_as_worker(tracking: str, worker_auth: tuple[str, str]) -> str:
    """The flow run's MLflow runs (a parent and one child, finished, with artifacts), read
    with the worker's credentials; returns the child's run id."""
    from mlflow import MlflowClient

    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = worker_auth
    try:
        client = MlflowClient(tracking)
        experiment = client.get_experiment_by_name("topology-check")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id])
        kinds = sorted(r.data.tags.get("greylab.kind", "") for r in runs)
        assert kinds == ["child", "parent"], kinds
        assert all(r.info.status == "FINISHED" for r in runs)
        child = next(r for r in runs if r.data.tags["greylab.kind"] == "child")
        assert child.data.params["system"] == "two_mass"
        assert client.list_artifacts(child.info.run_id)
    finally:
        os.environ.pop("MLFLOW_TRACKING_USERNAME", None)
        os.environ.pop("MLFLOW_TRACKING_PASSWORD", None)
    return child.info.run_id


def _assert_runs_stored(pg: Postgres, child_run_id: str) -> None:
    """The MLflow run and the Prefect flow run are in their PostgreSQL databases."""
    stored = pg.query(
        f"select status from runs where run_uuid = '{child_run_id}'", database="mlflow"
    )
    assert stored == [("FINISHED",)]
    assert pg.query(
        "select count(*) from flow_run where state_type = 'COMPLETED'", database="prefect"
    ) == [(1,)]


def test_compose_topology_runs_a_deployment(tmp_path: Path) -> None:
    user = _postgres_user()
    secret = {key: secrets.token_hex(12) for key in SECRETS}
    with postgres_server(tmp_path, user) as pg:
        _init_databases(pg, secret)
        top = _topology(tmp_path, pg, secret)
        with _servers(top):
            _assert_state_in_postgres_and_auth_on(top)
            worker_auth = _create_worker_account(top)
            with _worker(top):
                _deploy_and_run(top)
            child_run_id = _child_run_read_as_worker(top.tracking, worker_auth)
            _assert_runs_stored(pg, child_run_id)

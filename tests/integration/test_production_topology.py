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

import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.services import (
    BIN,
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


def test_compose_topology_runs_a_deployment(tmp_path: Path) -> None:
    for program in ("initdb", "postgres", "psql"):
        if postgres_bin(program) is None:
            pytest.skip(f"PostgreSQL program {program} not installed")
    user = unprivileged_user()
    if isinstance(user, str):
        pytest.skip(user)
    secret = {
        key: secrets.token_hex(12)
        for key in ("prefect_db", "mlflow_db", "prefect_api", "admin", "worker", "flask")
    }
    with postgres_server(tmp_path, user) as pg:
        # the compose init script, for real (psql over TCP as the superuser)
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
            "MLFLOW_TRACKING_USERNAME": "greylab-worker",
            "MLFLOW_TRACKING_PASSWORD": secret["worker"],
            "GREYLAB_HOME": str(tmp_path / "greylab-home"),
            "GREYLAB_DATA_ROOT": str(tmp_path / "data"),
            "GREYLAB_PROJECT_DIR": str(ROOT),
        }
        prefect_argv = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1",
                        "--port", str(prefect_port), "--no-ui"]  # fmt: skip
        mlflow_argv = [
            "sh", str(DOCKER / "mlflow-entrypoint.sh"), str(BIN / "mlflow"), "server",
            "--app-name", "basic-auth", "--host", "127.0.0.1", "--port", str(mlflow_port),
            "--backend-store-uri", pg.url("mlflow", secret["mlflow_db"], "mlflow", scheme="postgresql+psycopg2"),
            "--artifacts-destination", str(tmp_path / "artifacts"), "--workers", "2",
        ]  # fmt: skip
        with (
            service(prefect_argv, health=f"{api}/ready", log=tmp_path / "prefect.log",
                    env=server_env, timeout=150),
            service(mlflow_argv, health=f"{tracking}/health", log=tmp_path / "mlflow.log",
                    env=mlflow_env, timeout=150),
        ):  # fmt: skip
            # both servers keep their state in their own PostgreSQL database
            assert pg.query("select count(*) from alembic_version", database="prefect")
            assert pg.query("select count(*) from alembic_version", database="mlflow")
            assert pg.query("select count(*) from alembic_version_auth", database="mlflow_auth")
            # auth is on: no credential, no API
            assert _status(f"{api}/flows/filter") in (401, 405)
            assert _status(f"{tracking}/api/2.0/mlflow/experiments/search?max_results=1") == 401

            # the compose mlflow-init step: a non-admin worker account
            made = subprocess.run(
                [sys.executable, str(DOCKER / "mlflow_users.py")],
                env={**base_env, "MLFLOW_TRACKING_URI": tracking,
                     "MLFLOW_ADMIN_USERNAME": "admin", "MLFLOW_ADMIN_PASSWORD": secret["admin"],
                     "MLFLOW_WORKER_USERNAME": "greylab-worker",
                     "MLFLOW_WORKER_PASSWORD": secret["worker"]},
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            assert secret["worker"] not in made.stdout + made.stderr
            worker_auth = ("greylab-worker", secret["worker"])
            assert (
                _status(f"{tracking}/api/2.0/mlflow/users/get?username=admin", worker_auth) == 403
            )
            rows = pg.query(
                "select is_admin from users where username = 'greylab-worker'",
                database="mlflow_auth",
            )
            assert rows == [(False,)]

            worker_argv = [str(BIN / "prefect"), "worker", "start", "--pool", POOL,
                           "--type", "process", "--with-healthcheck"]  # fmt: skip
            worker_env = {
                **client_env,
                "PREFECT_WORKER_WEBSERVER_HOST": "127.0.0.1",
                "PREFECT_WORKER_WEBSERVER_PORT": str(health_port),
                "PREFECT_WORKER_QUERY_SECONDS": "2",
            }
            with service(worker_argv, health=f"http://127.0.0.1:{health_port}/health",
                         log=tmp_path / "worker.log", env=worker_env, timeout=120):  # fmt: skip
                # the compose prefect-deploy step (one deployment of deployments/prefect.yaml)
                deploy = subprocess.run(
                    [str(BIN / "prefect"), "--no-prompt", "deploy", "--name",
                     "inverse-simulation", "--prefect-file", "deployments/prefect.yaml"],
                    cwd=ROOT, env=client_env, capture_output=True, text=True, timeout=120,
                    check=False,
                )  # fmt: skip
                assert deploy.returncode == 0, deploy.stdout[-3000:] + deploy.stderr[-3000:]
                study = {"systems": ["two_mass"], "dt": 0.01, "t_end": 1.0,
                         "forward_check": False, "experiment": "topology-check"}  # fmt: skip
                code = (
                    "import json, sys\n"
                    "from prefect.deployments import run_deployment\n"
                    "run = run_deployment('inverse-simulation/inverse-simulation', timeout=180,\n"
                    f"    parameters={{'study': json.loads({json.dumps(json.dumps(study))})}})\n"
                    "print(run.state.type.value)\n"
                )
                trigger = subprocess.run(
                    [sys.executable, "-c", code], env=client_env, capture_output=True,
                    text=True, timeout=240, check=False,
                )  # fmt: skip
                worker_log = (tmp_path / "worker.log").read_text()[-4000:]
                assert trigger.stdout.strip().endswith("COMPLETED"), (
                    trigger.stdout + trigger.stderr[-3000:] + worker_log
                )

            # the flow run's MLflow runs, read with the worker's credentials
            from mlflow import MlflowClient

            os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = (
                worker_auth
            )
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
            stored = pg.query(
                f"select status from runs where run_uuid = '{child.info.run_id}'",
                database="mlflow",
            )
            assert stored == [("FINISHED",)]
            assert pg.query(
                "select count(*) from flow_run where state_type = 'COMPLETED'", database="prefect"
            ) == [(1,)]

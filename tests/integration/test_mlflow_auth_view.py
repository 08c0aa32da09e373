"""The compose MLflow server gets both MLflow's basic auth and greylab's default view
(`deployments/mlflow_ui.py`): a real MLflow server on 127.0.0.1, started through the compose
image's entrypoint (it writes the basic-auth configuration) with the compose service's command
(`python -m deployments.mlflow_ui server --app-name basic-auth`), and, the other way the
module offers, `mlflow server --app-name greylab` with the basic-auth app as its base
(`GREYLAB_MLFLOW_BASE_APP`). SQLite stores in the test's temporary folder; bounded waits; the
server stopped by its process group id."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from deployments.mlflow_ui import BASE_APP_ENV, BASIC_AUTH_APP, SCRIPT
from tests.compose_support import ROOT, service_command
from tests.integration.services import BIN, free_port, service

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ENTRYPOINT = ROOT / "deployments" / "docker" / "mlflow-entrypoint.sh"
ADMIN = "lab-admin"


def _compose_program() -> list[str]:
    """The compose MLflow service's program and app, up to its server options: `python -m
    deployments.mlflow_ui server --app-name basic-auth` (python: this interpreter)."""
    import yaml

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    command = service_command(services["mlflow"])
    program = command[: command.index("--app-name") + 2]
    assert program[0] == "python", program
    return [sys.executable, *program[1:]]


def _request(url: str, auth: tuple[str, str] | None = None, body: Any = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def _status_without_credentials(url: str, body: Any = None) -> int:
    with pytest.raises(urllib.error.HTTPError) as refused:
        _request(url, body=body)
    return refused.value.code


@pytest.mark.parametrize("way", ["compose-launcher", "app-name-greylab"])
def test_mlflow_with_basic_auth_serves_the_view_and_the_api(tmp_path: Path, way: str) -> None:
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    password = secrets.token_urlsafe(24)
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini"),
        "MLFLOW_AUTH_DATABASE_URI": f"sqlite:///{tmp_path / 'auth.db'}",
        "MLFLOW_AUTH_ADMIN_USERNAME": ADMIN,
        "MLFLOW_AUTH_ADMIN_PASSWORD": password,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    if way == "compose-launcher":
        program = _compose_program()
    else:
        program = [str(BIN / "mlflow"), "server", "--app-name", "greylab"]
        env[BASE_APP_ENV] = BASIC_AUTH_APP
    options = ["--host", "127.0.0.1", "--port", str(port),
               "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
               "--artifacts-destination", str(tmp_path / "artifacts"), "--workers", "2"]  # fmt: skip
    argv = ["sh", str(ENTRYPOINT), *program, *options]
    auth = (ADMIN, password)
    with service(argv, health=f"{uri}/health", log=tmp_path / "mlflow.log", env=env, timeout=150):
        # 1. nothing without credentials: the page and the API answer 401
        assert _status_without_credentials(f"{uri}/") == 401
        search = f"{uri}/api/2.0/mlflow/experiments/search"
        assert _status_without_credentials(search, {"max_results": 5}) == 401
        # 2. with them: MLflow's page with greylab's default-view script first in its head
        page = _request(f"{uri}/", auth)
        assert SCRIPT in page and page.index(SCRIPT) < page.index(b"</head>"), page[:300]
        # 3. the REST API works with the credentials (and checks them: a wrong password fails)
        created = json.loads(_request(f"{uri}/api/2.0/mlflow/experiments/create", auth,
                                      {"name": "press-uncertainty"}))  # fmt: skip
        found = json.loads(_request(search, auth, {"max_results": 5}))["experiments"]
        assert created["experiment_id"] in {e["experiment_id"] for e in found}
        with pytest.raises(urllib.error.HTTPError) as wrong:
            _request(search, (ADMIN, password + "x"), {"max_results": 5})
        assert wrong.value.code == 401
        # the basic-auth API itself (the admin the entrypoint's configuration names)
        users = json.loads(_request(f"{uri}/api/2.0/mlflow/users/get?username={ADMIN}", auth))
        assert users["user"]["is_admin"] is True

"""The service stack's secrets, auth and databases (docker-compose.yml, read statically; its
scripts run for real): .env.example holds placeholders only and the config check refuses them
and weak or shared values; Prefect and MLflow use separate databases and roles, API auth and a
non-admin MLflow account for the workers."""

from __future__ import annotations

import configparser
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.compose_support import (
    ROOT,
    depends_on,
    one_shot,
    resolve,
    service_command,
    service_env,
)

pytest_plugins = ("tests.compose_fixtures",)

_SECRET_KEYS = ("PASSWORD", "SECRET", "AUTH_STRING")
CHECK_ENV = ROOT / "deployments" / "docker" / "check-env.sh"
ENTRYPOINT = ROOT / "deployments" / "docker" / "mlflow-entrypoint.sh"


def _placeholders(env_example: dict[str, str]) -> set[str]:
    return {k for k, v in env_example.items() if "change-me" in v}


# -- secrets in .env ------------------------------------------------------------------------------


def test_env_example_holds_placeholders_only(env_example: dict[str, str]) -> None:
    secrets = {k: v for k, v in env_example.items() if any(s in k for s in _SECRET_KEYS)}
    assert len(secrets) >= 7
    real = {k: v for k, v in secrets.items() if "change-me" not in v}
    assert not real, f"secrets in .env.example must be change-me placeholders: {sorted(real)}"


def test_env_file_is_ignored_and_example_is_not() -> None:
    ignored = {line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()}
    assert ".env" in ignored and ".env.example" not in ignored
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


# -- databases and auth ---------------------------------------------------------------------------


def test_prefect_and_mlflow_use_different_databases_on_one_server(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    prefect_url = urlparse(
        resolve(
            service_env(services["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"],
            env_example,
        )
    )
    command = service_command(services["mlflow"])
    mlflow_url = urlparse(resolve(command[command.index("--backend-store-uri") + 1], env_example))
    # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3: name the installed driver
    assert prefect_url.scheme == "postgresql+asyncpg"
    assert mlflow_url.scheme == "postgresql+psycopg2"
    assert prefect_url.hostname == mlflow_url.hostname == "postgres"
    assert prefect_url.path != mlflow_url.path
    assert prefect_url.username != mlflow_url.username
    init = services["postgres"]["volumes"][1].split(":")[0]
    script = (ROOT / init).read_text()
    for db, user in (
        (prefect_url.path[1:], prefect_url.username),
        (mlflow_url.path[1:], mlflow_url.username),
    ):
        assert f"CREATE DATABASE {db} OWNER {user};" in script
        assert f"CREATE ROLE {user} LOGIN" in script


def test_prefect_auth_string_on_server_and_every_client(services: dict[str, Any]) -> None:
    server = service_env(services["prefect-server"])
    secret = server["PREFECT_SERVER_API_AUTH_STRING"]
    assert secret.startswith("${")
    clients = [n for n, s in services.items() if "PREFECT_API_URL" in service_env(s)]
    assert "prefect-worker" in clients
    for name in clients:
        assert service_env(services[name]).get("PREFECT_API_AUTH_STRING") == secret, name


def test_mlflow_basic_auth_s3_and_postgres(services: dict[str, Any]) -> None:
    mlflow = services["mlflow"]
    command, env = service_command(mlflow), service_env(mlflow)
    assert command[command.index("--app-name") + 1] == "basic-auth"
    assert command[command.index("--artifacts-destination") + 1].startswith("s3://")
    for key in (
        "MLFLOW_FLASK_SERVER_SECRET_KEY",
        "MLFLOW_AUTH_ADMIN_PASSWORD",
        "MLFLOW_S3_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ):
        assert env.get(key), f"mlflow: {key} not set"
    dockerfile = (ROOT / mlflow["build"]["dockerfile"]).read_text()
    for package in ("mlflow[auth]==", "psycopg2-binary==", "boto3=="):
        assert package in dockerfile
    for name, service in services.items():
        client = service_env(service)
        if "MLFLOW_TRACKING_URI" in client and name == "mlflow-init":
            assert client.get("MLFLOW_ADMIN_USERNAME") and client.get("MLFLOW_ADMIN_PASSWORD")
        elif "MLFLOW_TRACKING_URI" in client and name not in ("prefect-deploy", "dask-scheduler"):
            # (those two log nothing: they register deployments and schedule tasks)
            assert client.get("MLFLOW_TRACKING_USERNAME") and client.get(
                "MLFLOW_TRACKING_PASSWORD"
            ), f"{name}: MLflow client without credentials"
    init = " ".join(services["minio-init"]["entrypoint"])
    assert "mc mb --ignore-existing" in init


# -- refusing placeholders, credentials per service -----------------------------------------------


def test_every_service_waits_for_the_config_check(services: dict[str, Any]) -> None:
    check = services["config-check"]
    assert one_shot(check)
    assert check["entrypoint"] == ["sh", "/check-env.sh"]
    assert "./deployments/docker/check-env.sh:/check-env.sh:ro" in check["volumes"]

    def reaches(name: str, seen: frozenset[str] = frozenset()) -> bool:
        depends = depends_on(services[name])
        spec = depends.get("config-check")
        if spec is not None:
            assert spec["condition"] == "service_completed_successfully", name
            return True
        return any(reaches(d, seen | {name}) for d in depends if d not in seen)

    for name in services:
        if name != "config-check":
            assert reaches(name), f"{name} does not wait for config-check"
    for name in ("postgres", "prefect-server", "mlflow", "minio", "dask-scheduler"):
        assert "config-check" in depends_on(services[name]), name


def test_config_check_covers_every_placeholder(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    check = services["config-check"]
    names, env = service_command(check), service_env(check)
    placeholders = _placeholders(env_example)
    assert len(placeholders) >= 9
    assert placeholders <= set(names), sorted(placeholders - set(names))
    for name in names:
        assert env[name] in (f"${{{name}}}", f"${{{name}:?}}"), name


def _run_check(env: dict[str, str], names: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(CHECK_ENV), *names], env={"PATH": os.environ["PATH"], **env},
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def _good_values(names: list[str]) -> dict[str, str]:
    good = {name: secrets.token_hex(24) for name in names}
    good["MLFLOW_ADMIN_USERNAME"], good["MLFLOW_WORKER_USERNAME"] = "admin", "greylab-worker"
    good["PREFECT_API_AUTH_STRING"] = f"greylab:{secrets.token_hex(24)}"
    return good


def test_check_script_refuses_the_example_values(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    names = service_command(services["config-check"])
    refused = _run_check({n: env_example[n] for n in names}, names)
    assert refused.returncode == 1
    for name in _placeholders(env_example):
        assert f"{name}(placeholder)" in refused.stderr
    for value in env_example.values():  # names only, never a value
        if "change-me" in value:
            assert value not in refused.stderr + refused.stdout

    good = _good_values(names)
    accepted = _run_check(good, names)
    assert accepted.returncode == 0, accepted.stderr
    one_left = _run_check({**good, "MLFLOW_WORKER_PASSWORD": "change-me-mlflow-worker"}, names)
    assert one_left.returncode == 1 and "MLFLOW_WORKER_PASSWORD(placeholder)" in one_left.stderr


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"MLFLOW_DB_PASSWORD": ""}, "MLFLOW_DB_PASSWORD(empty)"),
        ({"POSTGRES_PASSWORD": "CHANGE-ME-please-0123456789"}, "POSTGRES_PASSWORD(placeholder)"),
        ({"PREFECT_DB_PASSWORD": "short"}, "PREFECT_DB_PASSWORD(shorter-than-16)"),
        ({"MLFLOW_DB_PASSWORD": "a/b@c:d" + "x" * 20}, "MLFLOW_DB_PASSWORD(not-url-safe)"),
        ({"PREFECT_API_AUTH_STRING": "greylab:tooshort"}, "PREFECT_API_AUTH_STRING(shorter"),
        (
            {"MLFLOW_WORKER_PASSWORD": "same"},
            "MLFLOW_WORKER_PASSWORD(same-as-MLFLOW_ADMIN_PASSWORD)",
        ),
    ],
)
def test_check_script_refuses_weak_or_shared_values(
    services: dict[str, Any], change: dict[str, str], reason: str
) -> None:
    names = service_command(services["config-check"])
    env = _good_values(names)
    if change.get("MLFLOW_WORKER_PASSWORD") == "same":
        change = {"MLFLOW_WORKER_PASSWORD": env["MLFLOW_ADMIN_PASSWORD"]}
    refused = _run_check({**env, **change}, names)
    assert refused.returncode == 1 and reason in refused.stderr, refused.stderr
    unset = {k: v for k, v in env.items() if k != "MINIO_ROOT_PASSWORD"}
    assert "MINIO_ROOT_PASSWORD(empty)" in _run_check(unset, names).stderr


def test_mlflow_entrypoint_writes_a_private_auth_config(tmp_path: Path) -> None:
    config = tmp_path / "auth.ini"
    env = {
        "PATH": os.environ["PATH"],
        "MLFLOW_AUTH_DATABASE_URI": "postgresql+psycopg2://mlflow:pw@postgres:5432/mlflow_auth",
        "MLFLOW_AUTH_ADMIN_USERNAME": "admin",
        "MLFLOW_AUTH_ADMIN_PASSWORD": secrets.token_hex(12),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(12),
        "MLFLOW_AUTH_CONFIG_PATH": str(config),
    }
    ran = subprocess.run(
        ["sh", str(ENTRYPOINT), "sh", "-c", 'echo "$MLFLOW_AUTH_CONFIG_PATH"'], env=env,
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == str(config)  # exported to the server it execs
    assert config.stat().st_mode & 0o077 == 0
    parsed = configparser.ConfigParser()
    parsed.read(config)
    assert parsed["mlflow"]["database_uri"] == env["MLFLOW_AUTH_DATABASE_URI"]
    assert parsed["mlflow"]["default_permission"] == "READ"
    assert env["MLFLOW_AUTH_ADMIN_PASSWORD"] not in config.read_text()
    refused = subprocess.run(
        ["sh", str(ENTRYPOINT), "true"],
        env={**env, "MLFLOW_AUTH_ADMIN_PASSWORD": "change-me-mlflow-admin"},
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and "change-me" in refused.stderr


def test_mlflow_user_store_in_postgres_and_image_entrypoint(services: dict[str, Any]) -> None:
    mlflow = services["mlflow"]
    auth_url = urlparse(service_env(mlflow)["MLFLOW_AUTH_DATABASE_URI"])
    assert auth_url.scheme == "postgresql+psycopg2" and auth_url.hostname == "postgres"
    assert (
        "CREATE DATABASE mlflow_auth OWNER mlflow;"
        in (ROOT / "deployments" / "docker" / "postgres-init.sh").read_text()
    )
    assert mlflow["entrypoint"] == ["/usr/local/bin/mlflow-entrypoint.sh"]
    dockerfile = (ROOT / mlflow["build"]["dockerfile"]).read_text()
    assert "COPY deployments/docker/mlflow-entrypoint.sh /usr/local/bin/" in dockerfile
    assert "COPY deployments/docker/mlflow_users.py /usr/local/lib/greylab/" in dockerfile
    assert os.access(ENTRYPOINT, os.X_OK)


def test_workers_use_the_non_admin_mlflow_account(services: dict[str, Any]) -> None:
    init = services["mlflow-init"]
    assert one_shot(init) and init["entrypoint"][-1].endswith("/mlflow_users.py")
    assert depends_on(init)["mlflow"]["condition"] == "service_healthy"
    assert service_env(init)["MLFLOW_WORKER_PASSWORD"] == "${MLFLOW_WORKER_PASSWORD}"
    for name in ("prefect-worker", "dask-worker"):
        env = service_env(services[name])
        assert env["MLFLOW_TRACKING_USERNAME"] == "${MLFLOW_WORKER_USERNAME}", name
        assert env["MLFLOW_TRACKING_PASSWORD"] == "${MLFLOW_WORKER_PASSWORD}", name
        assert depends_on(services[name])["mlflow-init"]["condition"] == (
            "service_completed_successfully"
        )
    holders = {
        name
        for name, s in services.items()
        if "${MLFLOW_ADMIN_PASSWORD}" in service_env(s).values()
    }
    assert holders == {"config-check", "mlflow", "mlflow-init"}, holders
    assert "MLFLOW_TRACKING_PASSWORD" not in service_env(services["prefect-deploy"])


def test_database_roles_per_service(services: dict[str, Any]) -> None:
    holders: dict[str, set[str]] = {}
    for name, service in services.items():
        for key in ("PREFECT_DB_PASSWORD", "MLFLOW_DB_PASSWORD", "POSTGRES_PASSWORD"):
            if f"${{{key}}}" in yaml.safe_dump(service):
                holders.setdefault(key, set()).add(name)
    assert holders["PREFECT_DB_PASSWORD"] == {"config-check", "postgres", "prefect-server"}
    assert holders["MLFLOW_DB_PASSWORD"] == {"config-check", "postgres", "mlflow"}
    assert holders["POSTGRES_PASSWORD"] == {"config-check", "postgres"}

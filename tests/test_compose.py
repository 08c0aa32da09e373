"""The service stack (docker-compose.yml) is consistent: Docker cannot run here, so this test
reads the YAML and checks services, variables, ports, healthchecks, images, volumes, the
dependency graph, auth settings, separate databases, and that everything it calls exists."""

from __future__ import annotations

import configparser
import os
import re
import secrets
import shlex
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
SERVICES = {
    "config-check",
    "postgres",
    "prefect-server",
    "prefect-worker",
    "mlflow",
    "mlflow-init",
    "minio",
    "minio-init",
    "prefect-deploy",
    "dask-scheduler",
    "dask-worker",
    "dask-certs",
}
# `${VAR}`, `${VAR:-default}`, `${VAR?err}`, `$VAR`; `$$` is a literal dollar for the shell.
_VARIABLE = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")
_SECRET_KEYS = ("PASSWORD", "SECRET", "AUTH_STRING")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _resolve(text: str, env: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: env[m.group(1) or m.group(2)], text).replace("$$", "$")


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def _one_shot(service: dict[str, Any]) -> bool:
    return str(service.get("restart", "no")) == "no"


def _images(services: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    return {n: _resolve(s["image"], env) for n, s in services.items() if "image" in s}


# -- services, variables, secrets ----------------------------------------------------------------


def test_all_services_are_present(services: dict[str, Any]) -> None:
    assert set(services) == SERVICES


def test_every_variable_is_defined_in_env_example(env_example: dict[str, str]) -> None:
    used = {a or b for a, b in _VARIABLE.findall(COMPOSE.read_text())}
    assert used, "the compose file takes its settings from .env"
    missing = sorted(used - set(env_example))
    assert not missing, f"define these in .env.example: {missing}"


def test_env_example_holds_placeholders_only(env_example: dict[str, str]) -> None:
    secrets = {k: v for k, v in env_example.items() if any(s in k for s in _SECRET_KEYS)}
    assert len(secrets) >= 7
    real = {k: v for k, v in secrets.items() if "change-me" not in v}
    assert not real, f"secrets in .env.example must be change-me placeholders: {sorted(real)}"


def test_env_file_is_ignored_and_example_is_not() -> None:
    ignored = {line.strip() for line in (ROOT / ".gitignore").read_text().splitlines()}
    assert ".env" in ignored and ".env.example" not in ignored
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


# -- ports, healthchecks, images, volumes ---------------------------------------------------------


def test_published_ports_bind_localhost_only(services: dict[str, Any]) -> None:
    published = []
    for name, service in services.items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                host_ip = port.get("host_ip")
            else:
                parts = str(port).split(":")
                host_ip = parts[0] if len(parts) == 3 else None
            assert host_ip == "127.0.0.1", f"{name}: port {port!r} must bind 127.0.0.1"
            published.append(name)
    assert {"prefect-server", "mlflow", "minio"} <= set(published)


def test_every_long_running_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name, service in services.items():
        check = service.get("healthcheck")
        if _one_shot(service):
            continue
        assert check and not check.get("disable"), f"{name}: no healthcheck"
        assert check.get("test"), f"{name}: empty healthcheck"
    assert "/api/ready" in str(services["prefect-server"]["healthcheck"]["test"])
    assert services["minio"]["healthcheck"]["test"] == ["CMD", "mc", "ready", "local"]


def test_images_are_pinned(services: dict[str, Any], env_example: dict[str, str]) -> None:
    for name, image in _images(services, env_example).items():
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: pin {image!r} to a version"
    for dockerfile in (ROOT / "deployments" / "docker").glob("*Dockerfile"):
        for line in dockerfile.read_text().splitlines():
            if line.startswith("FROM "):
                base = line.split()[1]
                assert ":" in base and not base.endswith(":latest"), f"{dockerfile}: {line}"


def test_volumes_are_declared_and_bind_mounts_exist(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if source.startswith("${"):  # a host folder chosen in .env (created by Docker)
                continue
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name}: bind mount {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} not declared"
                used.add(source)
    assert used == declared, f"declared but unused volumes: {sorted(declared - used)}"


# -- dependencies ---------------------------------------------------------------------------------


def test_dependencies_wait_for_health_and_form_no_cycle(services: dict[str, Any]) -> None:
    graph: dict[str, list[str]] = {}
    for name, service in services.items():
        depends = service.get("depends_on", {})
        if isinstance(depends, list):
            depends = {d: {"condition": "service_started"} for d in depends}
        graph[name] = list(depends)
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown {target}"
            condition = spec.get("condition", "service_started")
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name}: {target} has no healthcheck"
            elif condition == "service_completed_successfully":
                assert _one_shot(services[target]), f"{name}: {target} is not one-shot"

    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        assert state.get(node) != 1, f"dependency cycle: {' -> '.join([*path, node])}"
        if state.get(node) == 2:
            return
        state[node] = 1
        for target in graph[node]:
            visit(target, [*path, node])
        state[node] = 2

    for node in graph:
        visit(node, [])
    assert services["mlflow"]["depends_on"]["minio-init"]["condition"] == (
        "service_completed_successfully"
    )


# -- databases and auth ---------------------------------------------------------------------------


def test_prefect_and_mlflow_use_different_databases_on_one_server(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    prefect_url = urlparse(
        _resolve(
            _env(services["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"], env_example
        )
    )
    command = _command(services["mlflow"])
    mlflow_url = urlparse(_resolve(command[command.index("--backend-store-uri") + 1], env_example))
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
    server = _env(services["prefect-server"])
    secret = server["PREFECT_SERVER_API_AUTH_STRING"]
    assert secret.startswith("${")
    clients = [n for n, s in services.items() if "PREFECT_API_URL" in _env(s)]
    assert "prefect-worker" in clients
    for name in clients:
        assert _env(services[name]).get("PREFECT_API_AUTH_STRING") == secret, name


def test_mlflow_basic_auth_s3_and_postgres(services: dict[str, Any]) -> None:
    mlflow = services["mlflow"]
    command, env = _command(mlflow), _env(mlflow)
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
        client = _env(service)
        if "MLFLOW_TRACKING_URI" in client and name == "mlflow-init":
            assert client.get("MLFLOW_ADMIN_USERNAME") and client.get("MLFLOW_ADMIN_PASSWORD")
        elif "MLFLOW_TRACKING_URI" in client and name not in ("prefect-deploy", "dask-scheduler"):
            # (those two log nothing: they register deployments and schedule tasks)
            assert client.get("MLFLOW_TRACKING_USERNAME") and client.get(
                "MLFLOW_TRACKING_PASSWORD"
            ), f"{name}: MLflow client without credentials"
    init = " ".join(services["minio-init"]["entrypoint"])
    assert "mc mb --ignore-existing" in init


# -- what the stack runs exists in the project ----------------------------------------------------


def test_worker_and_dask_run_the_project_image(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    images = _images(services, env_example)
    assert images["prefect-worker"] == images["dask-scheduler"] == images["dask-worker"]
    command = " ".join(_command(services["prefect-worker"]))
    assert command.startswith("prefect worker start --pool greylab-process --type process")
    assert _command(services["dask-worker"])[:3] == ["dask", "worker", "tls://dask-scheduler:8786"]
    prefect_yaml = ROOT / "deployments" / "prefect.yaml"
    if prefect_yaml.exists():  # deployments must target the pool the worker polls
        pools = {
            (d.get("work_pool") or {}).get("name")
            for d in (yaml.safe_load(prefect_yaml.read_text()) or {}).get("deployments", [])
        }
        assert pools <= {"greylab-process", None}, pools


def test_build_files_and_their_copy_sources_exist(services: dict[str, Any]) -> None:
    built = [s["build"] for s in services.values() if "build" in s]
    assert len(built) >= 2
    for build in built:
        context = ROOT / build.get("context", ".")
        dockerfile = context / build["dockerfile"]
        assert dockerfile.is_file(), dockerfile
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                for source in line.split()[1:-1]:
                    assert (context / source).exists(), f"{dockerfile.name}: COPY {source}"


def test_called_commands_and_modules_exist(services: dict[str, Any]) -> None:
    """Programs the built images run are installed there (the project's dependencies, or the
    MLflow image's pip line); `python -m X` and `greylab X` name modules and subcommands that
    exist in the project."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    for name, service in services.items():
        command = _command(service)
        if not command or "build" not in service:
            continue
        program = command[0]
        dockerfile = (ROOT / service["build"]["dockerfile"]).read_text()
        if "pip install -c constraints.txt -e ." in dockerfile:  # the project image
            assert program in ("prefect", "dask", "greylab", "python"), f"{name}: {program}"
            if program in ("prefect", "dask"):
                assert f'"{program}' in pyproject, f"{program} is not a project dependency"
        else:
            assert re.search(rf"pip install .*\b{program}\[", dockerfile), f"{name}: {program}"
        if program == "python" and command[1] == "-m":
            module = command[2].replace(".", "/")
            assert (ROOT / f"{module}.py").exists() or (ROOT / module / "__main__.py").exists()
        if program == "greylab":
            from flows.cli import main

            assert main([command[1], "--help"]) == 0, f"{name}: greylab {command[1]} missing"


def test_greylab_variables_are_the_documented_ones(compose: dict[str, Any]) -> None:
    documented = (ROOT / "tasks" / "settings.py").read_text()
    env = compose["x-greylab-env"]
    for key in (
        "GREYLAB_HOME",
        "GREYLAB_DATA_ROOT",
        "GREYLAB_DASK_ADDRESS",
        "MLFLOW_TRACKING_URI",
        "PREFECT_API_URL",
    ):
        assert key in env and f"`{key}`" in documented, key
    for key in env:
        if key.startswith("GREYLAB_"):
            assert f"`{key}`" in documented, f"{key} is not documented in tasks/settings.py"


def test_deploy_service_registers_the_project_deployments(services: dict[str, Any]) -> None:
    deploy = services["prefect-deploy"]
    command = deploy["command"]
    prefect_file = command[command.index("--prefect-file") + 1]
    assert (ROOT / prefect_file).is_file()
    assert deploy["working_dir"] == deploy["environment"]["GREYLAB_PROJECT_DIR"]
    spec = yaml.safe_load((ROOT / prefect_file).read_text())
    pools = {d["work_pool"]["name"] for d in spec["deployments"]}
    worker = services["prefect-worker"]["command"]
    assert pools == {worker[worker.index("--pool") + 1]}
    for deployment in spec["deployments"]:
        module, _, attribute = deployment["entrypoint"].partition(":")
        assert (ROOT / module).is_file() and f"def {attribute}(" in (ROOT / module).read_text()


# -- refusing placeholders, credentials per service, the Dask network ----------------------------

CHECK_ENV = ROOT / "deployments" / "docker" / "check-env.sh"
ENTRYPOINT = ROOT / "deployments" / "docker" / "mlflow-entrypoint.sh"


def _depends(service: dict[str, Any]) -> dict[str, dict[str, str]]:
    depends = service.get("depends_on", {})
    if isinstance(depends, list):
        return {d: {"condition": "service_started"} for d in depends}
    return depends


def _placeholders(env_example: dict[str, str]) -> set[str]:
    return {k for k, v in env_example.items() if "change-me" in v}


def test_every_service_waits_for_the_config_check(services: dict[str, Any]) -> None:
    check = services["config-check"]
    assert _one_shot(check)
    assert check["entrypoint"] == ["sh", "/check-env.sh"]
    assert "./deployments/docker/check-env.sh:/check-env.sh:ro" in check["volumes"]

    def reaches(name: str, seen: frozenset[str] = frozenset()) -> bool:
        depends = _depends(services[name])
        spec = depends.get("config-check")
        if spec is not None:
            assert spec["condition"] == "service_completed_successfully", name
            return True
        return any(reaches(d, seen | {name}) for d in depends if d not in seen)

    for name in services:
        if name != "config-check":
            assert reaches(name), f"{name} does not wait for config-check"
    for name in ("postgres", "prefect-server", "mlflow", "minio", "dask-scheduler"):
        assert "config-check" in _depends(services[name]), name


def test_config_check_covers_every_placeholder(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    check = services["config-check"]
    names, env = _command(check), _env(check)
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
    names = _command(services["config-check"])
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
    names = _command(services["config-check"])
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
    auth_url = urlparse(_env(mlflow)["MLFLOW_AUTH_DATABASE_URI"])
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
    assert _one_shot(init) and init["entrypoint"][-1].endswith("/mlflow_users.py")
    assert _depends(init)["mlflow"]["condition"] == "service_healthy"
    assert _env(init)["MLFLOW_WORKER_PASSWORD"] == "${MLFLOW_WORKER_PASSWORD}"
    for name in ("prefect-worker", "dask-worker"):
        env = _env(services[name])
        assert env["MLFLOW_TRACKING_USERNAME"] == "${MLFLOW_WORKER_USERNAME}", name
        assert env["MLFLOW_TRACKING_PASSWORD"] == "${MLFLOW_WORKER_PASSWORD}", name
        assert _depends(services[name])["mlflow-init"]["condition"] == (
            "service_completed_successfully"
        )
    holders = {
        name for name, s in services.items() if "${MLFLOW_ADMIN_PASSWORD}" in _env(s).values()
    }
    assert holders == {"config-check", "mlflow", "mlflow-init"}, holders
    assert "MLFLOW_TRACKING_PASSWORD" not in _env(services["prefect-deploy"])


def test_database_roles_per_service(services: dict[str, Any]) -> None:
    holders: dict[str, set[str]] = {}
    for name, service in services.items():
        for key in ("PREFECT_DB_PASSWORD", "MLFLOW_DB_PASSWORD", "POSTGRES_PASSWORD"):
            if f"${{{key}}}" in yaml.safe_dump(service):
                holders.setdefault(key, set()).add(name)
    assert holders["PREFECT_DB_PASSWORD"] == {"config-check", "postgres", "prefect-server"}
    assert holders["MLFLOW_DB_PASSWORD"] == {"config-check", "postgres", "mlflow"}
    assert holders["POSTGRES_PASSWORD"] == {"config-check", "postgres"}


def test_dask_scheduler_is_internal_only(compose: dict[str, Any], services: dict[str, Any]) -> None:
    scheduler = services["dask-scheduler"]
    assert not scheduler.get("ports") and not scheduler.get("expose")
    assert scheduler["networks"] == ["compute"]
    assert compose["networks"]["compute"]["internal"] is True
    on_compute = {n for n, s in services.items() if "compute" in (s.get("networks") or [])}
    assert on_compute == {"dask-scheduler", "dask-worker", "prefect-worker"}
    assert services["config-check"]["network_mode"] == "none"


def test_every_dask_process_speaks_mutual_tls(services: dict[str, Any]) -> None:
    """Scheduler, Dask workers and the Prefect worker (the client) carry the cluster's TLS
    settings and certificates; the addresses are tls://; the certificates come first."""
    for name in ("dask-scheduler", "dask-worker", "prefect-worker"):
        service = services[name]
        env = service.get("environment") or {}
        assert env.get("DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION") == "True", name
        assert env.get("DASK_DISTRIBUTED__COMM__TLS__CA_FILE") == "/tls/ca.pem", name
        role = "CLIENT" if name == "prefect-worker" else name.split("-")[1].upper()
        assert env.get(f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY") == "/tls/cluster-key.pem"
        assert "dask-tls:/tls:ro" in service.get("volumes", []), name
        assert env.get("GREYLAB_DASK_ADDRESS", "tls://").startswith("tls://"), name
    assert services["dask-scheduler"]["depends_on"]["dask-certs"] == {
        "condition": "service_completed_successfully"
    }
    certs = services["dask-certs"]
    assert certs["command"] == ["python", "deployments/docker/dask_certs.py", "/tls"]
    assert (ROOT / "deployments" / "docker" / "dask_certs.py").is_file()
    assert certs.get("network_mode") == "none"  # makes keys, talks to nobody

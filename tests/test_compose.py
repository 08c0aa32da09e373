"""The service stack (docker-compose.yml) is consistent: Docker cannot run here, so this test
reads the YAML and checks services, variables, ports, healthchecks, images, volumes, the
dependency graph, that everything it calls exists, and the Dask network. Secrets, auth and
databases: tests/test_compose_secrets.py."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.compose_support import (
    COMPOSE,
    ROOT,
    VARIABLE,
    depends_on,
    one_shot,
    resolve,
    service_command,
)

pytest_plugins = ("tests.compose_fixtures",)

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


def _images(services: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    return {n: resolve(s["image"], env) for n, s in services.items() if "image" in s}


# -- services and variables -----------------------------------------------------------------------


def test_all_services_are_present(services: dict[str, Any]) -> None:
    assert set(services) == SERVICES


def test_every_variable_is_defined_in_env_example(env_example: dict[str, str]) -> None:
    used = {a or b for a, b in VARIABLE.findall(COMPOSE.read_text())}
    assert used, "the compose file takes its settings from .env"
    missing = sorted(used - set(env_example))
    assert not missing, f"define these in .env.example: {missing}"


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
        if one_shot(service):
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
        depends = depends_on(service)
        graph[name] = list(depends)
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown {target}"
            condition = spec.get("condition", "service_started")
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name}: {target} has no healthcheck"
            elif condition == "service_completed_successfully":
                assert one_shot(services[target]), f"{name}: {target} is not one-shot"

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


# -- what the stack runs exists in the project ----------------------------------------------------


def test_worker_and_dask_run_the_project_image(
    services: dict[str, Any], env_example: dict[str, str]
) -> None:
    images = _images(services, env_example)
    assert images["prefect-worker"] == images["dask-scheduler"] == images["dask-worker"]
    command = " ".join(service_command(services["prefect-worker"]))
    assert command.startswith("prefect worker start --pool greylab-process --type process")
    assert service_command(services["dask-worker"])[:3] == [
        "dask",
        "worker",
        "tls://dask-scheduler:8786",
    ]
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
        command = service_command(service)
        if not command or "build" not in service:
            continue
        program = command[0]
        dockerfile = (ROOT / service["build"]["dockerfile"]).read_text()
        if "pip install -c constraints.txt -e ." in dockerfile:  # the project image
            assert program in ("prefect", "dask", "greylab", "python"), f"{name}: {program}"
            if program in ("prefect", "dask"):
                assert f'"{program}' in pyproject, f"{program} is not a project dependency"
        elif program == "python" and command[1] == "-m":  # a module copied into the image
            path = command[2].replace(".", "/") + ".py"
            assert re.search(rf"^COPY .*\b{path}\b.* (\S+)/$", dockerfile, re.M), f"{name}: {path}"
            assert "ENV PYTHONPATH=" in dockerfile, f"{name}: {command[2]} not importable"
        else:
            assert re.search(rf"pip install .*\b{program}\[", dockerfile), f"{name}: {program}"
        if program == "python" and command[1] == "-m":
            module = command[2].replace(".", "/")
            assert (ROOT / f"{module}.py").exists() or (ROOT / module / "__main__.py").exists()
        if program == "greylab":
            from flows.cli import main

            assert main([command[1], "--help"]) == 0, f"{name}: greylab {command[1]} missing"


def test_greylab_variables_are_the_documented_ones(compose: dict[str, Any]) -> None:
    documented = (ROOT / "runtime" / "settings.py").read_text()
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
            assert f"`{key}`" in documented, f"{key} is not documented in runtime/settings.py"


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


# -- the Dask network -----------------------------------------------------------------------------


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

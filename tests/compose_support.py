"""Reading the service stack for the compose tests (tests/test_compose*.py): where the files
are, `.env` variable substitution, and a service's environment, command and dependencies as
docker-compose.yml may spell them (mapping or list, string or argv)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
# `${VAR}`, `${VAR:-default}`, `${VAR?err}`, `$VAR`; `$$` is a literal dollar for the shell.
VARIABLE = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")


def resolve(text: str, env: dict[str, str]) -> str:
    """``text`` with its variables substituted from ``env`` (and ``$$`` as ``$``)."""
    return VARIABLE.sub(lambda m: env[m.group(1) or m.group(2)], text).replace("$$", "$")


def service_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def service_command(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def one_shot(service: dict[str, Any]) -> bool:
    return str(service.get("restart", "no")) == "no"


def depends_on(service: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The service's dependencies with their conditions (a plain list means started)."""
    depends = service.get("depends_on", {})
    if isinstance(depends, list):
        return {d: {"condition": "service_started"} for d in depends}
    return depends

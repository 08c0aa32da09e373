"""Fixtures of the compose tests, a pytest plugin: ``pytest_plugins = ("tests.compose_fixtures",)``
(module scope: read once per test module)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.compose_support import COMPOSE, ENV_EXAMPLE


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

"""Test-session environment: the same quiet Prefect console as the command line, set before
Prefect is imported (it reads its settings at import). Prefect's ephemeral server logs its
shutdown from an exit hook, after pytest has closed the captured streams."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# Tests build study settings as the trusted Python API does, with files anywhere (tmp_path);
# the confinement of dashboard data paths (flows/data_refs.py) is tested on its own, with this
# unset (tests/hostile/test_dashboard_data.py).
os.environ.setdefault("GREYLAB_ALLOWED_DATA_ROOTS", os.sep)
# Each CLI call of the suite gets its own temporary Prefect server that ends with it: the
# shared local server (runtime/local_server.py) would outlive every temporary GREYLAB_HOME for
# its idle time; its own tests set the variable themselves.
os.environ.setdefault("GREYLAB_SERVER_IDLE", "0")
# Commands run in-process, not in the warm fork server (runtime/warm.py): a daemon per
# temporary GREYLAB_HOME would outlive the test by its idle time; its own tests
# (tests/flows/test_warm_cli.py) enable it and stop what they start.
os.environ.setdefault("GREYLAB_WARM", "0")


#: markers of the long tests (`make test-fast` leaves them out)
_LONG = ("slow", "integration", "browser")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """The modules holding long tests run first, each module's tests together and in their
    order (a module-scoped fixture is set up once per worker). pytest-xdist hands tests out in
    this order, so at the end both workers run short tests and finish together instead of one
    waiting for the other's last 2-minute search (the longest-first rule)."""
    long_modules = {
        item.nodeid.split("::")[0] for item in items
        if any(item.get_closest_marker(name) for name in _LONG)
    }  # fmt: skip
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in long_modules)


def pytest_configure(config: Any) -> None:
    """pytest-xdist's load scheduling hands each worker a first chunk of a quarter of its share
    and more only as it runs dry: with the long modules first, the first worker got 186
    consecutive tests holding most of the long ones and nothing after them (a full run of
    1490 tests, 2026-12-06 03:16-03:48 UTC: its tests 1862 s, the other worker's 1304 tests
    1549 s, then idle). One test at a time (`--maxschedchunk 1`, unless given) lets the free
    worker take the next long test: longest first on both workers (that run's durations
    replayed through xdist's rules: both end at 1706 s instead of 1862 and 1549)."""
    if getattr(config.option, "maxschedchunk", False) is None:
        config.option.maxschedchunk = 1


#: where a command run in-process keeps the plugin references it allowed for the rest of the
#: process (`--models mod:attr`, `--system mod:attr`), and their environment variables
_ALLOWANCES = {"models.registry": "GREYLAB_ALLOWED_MODELS",
               "models.underactuated.plugins": "GREYLAB_ALLOWED_SYSTEMS"}  # fmt: skip


@pytest.fixture(autouse=True)
def _plugin_allowances_end_with_the_test() -> Iterator[None]:
    """A plugin one test allowed is not allowed in the next test of the same worker (a form
    test listing the allowed models saw `springmod:spring` of a press cache test run before
    it): the session sets and variables as they were before the test."""
    sets = {
        name: set(getattr(sys.modules.get(name), "_SESSION_ALLOWED", ())) for name in _ALLOWANCES
    }
    env = {var: os.environ.get(var) for var in _ALLOWANCES.values()}
    yield
    for name, kept in sets.items():
        session = getattr(sys.modules.get(name), "_SESSION_ALLOWED", None)
        if isinstance(session, set):
            session.clear()
            session.update(kept)
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value

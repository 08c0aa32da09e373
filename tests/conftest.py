"""Test-session environment: the same quiet Prefect console as the command line, set before
Prefect is imported (it reads its settings at import). Prefect's ephemeral server logs its
shutdown from an exit hook, after pytest has closed the captured streams."""

from __future__ import annotations

import os

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

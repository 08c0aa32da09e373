"""Test-session environment: the same quiet Prefect console as the command line, set before
Prefect is imported (it reads its settings at import). Prefect's ephemeral server logs its
shutdown from an exit hook, after pytest has closed the captured streams."""

from __future__ import annotations

import os

os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

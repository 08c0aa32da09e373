"""The MLflow server as a lab starts it for the dashboards (`deployments/mlflow_ui.py` in
front of `mlflow server`: the UI opens in its model-training view), and Chromium from a fresh
profile, for the browser tests."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.services import free_port, service

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "browser-shots"
CHROMIUM = os.environ.get("GREYLAB_CHROMIUM", "/usr/bin/chromium")


@contextlib.contextmanager
def mlflow_ui_server(tmp: Path) -> Iterator[str]:
    """`python -m deployments.mlflow_ui server ...` (SQLite backend, local artifacts), the
    command docs/operations.md gives; yields its URI."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "deployments.mlflow_ui", "server", "--host", "127.0.0.1",
        "--port", str(port), "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
        "--artifacts-destination", str(tmp / "artifacts"), "--workers", "2",
    ]  # fmt: skip
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with service(argv, health=f"{uri}/health", log=tmp / "mlflow.log", env=env):
        yield uri


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless; each `browser.new_context()` is a fresh profile (no
    cookies, no localStorage)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} missing: `make browser` installs Debian's chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])  # fmt: skip
        try:
            yield browser
        finally:
            browser.close()


def fresh_page(browser: Any, width: int = 1400) -> Any:
    page = browser.new_context(viewport={"width": width, "height": 1000}).new_page()
    page.set_default_timeout(60_000)
    return page


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

"""Create (or update) the non-admin MLflow account that workers log with, through the basic-auth
REST API with the admin's credentials. Run once per start by the compose one-shot `mlflow-init`
(and by tests/integration/test_production_topology.py against a real server).

Environment: MLFLOW_TRACKING_URI, MLFLOW_ADMIN_USERNAME, MLFLOW_ADMIN_PASSWORD,
MLFLOW_WORKER_USERNAME, MLFLOW_WORKER_PASSWORD. Standard library only (runs in the MLflow
image). Idempotent: an existing worker account gets the configured password and loses admin
rights if it had them. Exit 0 on success, 1 with one line on stderr otherwise; no secret is
printed.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

API = "/api/2.0/mlflow/users"


class Failure(Exception):
    pass


def _call(
    base: str, method: str, path: str, auth: tuple[str, str], body: Mapping[str, object] | None
) -> tuple[int, str]:
    token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        base.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")[:300]


def _wait_healthy(base: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base.rstrip("/") + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise Failure(f"MLflow at {base} not healthy after {timeout:.0f} s")
        time.sleep(1)


def ensure_worker(env: Mapping[str, str], *, timeout: float = 120.0) -> str:
    """Make the worker account exist, non-admin, with the configured password; returns
    "created" or "updated"."""
    try:
        base = env["MLFLOW_TRACKING_URI"]
        admin = (env["MLFLOW_ADMIN_USERNAME"], env["MLFLOW_ADMIN_PASSWORD"])
        worker, password = env["MLFLOW_WORKER_USERNAME"], env["MLFLOW_WORKER_PASSWORD"]
    except KeyError as missing:
        raise Failure(f"{missing.args[0]} is not set") from None
    if not all((*admin, worker, password)):
        raise Failure("MLflow admin and worker credentials must not be empty")
    if worker == admin[0]:
        raise Failure("MLFLOW_WORKER_USERNAME must differ from MLFLOW_ADMIN_USERNAME")
    if password == admin[1]:
        raise Failure("MLFLOW_WORKER_PASSWORD must differ from MLFLOW_ADMIN_PASSWORD")
    _wait_healthy(base, timeout)

    status, text = _call(base, "POST", f"{API}/create", admin, {"username": worker, "password": password})  # fmt: skip
    outcome = "created"
    if status != 200:
        if "RESOURCE_ALREADY_EXISTS" not in text and "already exists" not in text:
            raise Failure(f"creating MLflow user {worker!r} failed: HTTP {status}")
        outcome = "updated"
        status, _ = _call(base, "PATCH", f"{API}/update-password", admin, {"username": worker, "password": password})  # fmt: skip
        if status != 200:
            raise Failure(f"setting the password of MLflow user {worker!r} failed: HTTP {status}")
    status, _ = _call(base, "PATCH", f"{API}/update-admin", admin, {"username": worker, "is_admin": False})  # fmt: skip
    if status != 200:
        raise Failure(f"revoking admin rights of MLflow user {worker!r} failed: HTTP {status}")
    return outcome


def main() -> int:
    try:
        outcome = ensure_worker(os.environ)
    except Failure as failure:
        print(f"mlflow-init: {failure}", file=sys.stderr)
        return 1
    print(f"mlflow-init: worker account {os.environ['MLFLOW_WORKER_USERNAME']!r} {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

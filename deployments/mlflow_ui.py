"""MLflow's server with its UI opening greylab's experiments in the model-training view.

What decides the view (read from the installed MLflow 3 UI bundle,
`mlflow/server/js/build/static/js/main.*.js`): the workflow type is the URL query
`workflowType` if it says `genai` or `machine_learning`, else the browser's localStorage entry
`mlflow.workflowType_v1` (the bundle's `useLocalStorage({key: "mlflow.workflowType",
version: 1})`, stored as `<key>_v<version>`), whose default is `genai`. The experiment tag
`mlflow.experimentKind` is read only when a feature flag is off, and it is on in this build;
`mlflow server` has no option or environment variable for the default. So a fresh browser
lands in the GenAI view ("Overview / Usage", traces, no model registry) from MLflow's home or
an experiment URL without the query.

This module sets the default where it belongs, on the server: every HTML page it serves gets
a one-line script that stores `machine_learning` in that entry when the browser has none (a
user who switches to the GenAI view keeps that choice). Start the server as
`mlflow server --app-name greylab <options>` (the `mlflow.app` entry point `greylab` of
pyproject.toml names `create_app`) or as `python -m deployments.mlflow_ui server <mlflow server
options>`: the same command line as `mlflow server`, with this app in front of MLflow's own
(`tests/browser/test_mlflow_ui.py` starts the first with MLflow's own app loader and
checks the bundle still reads that key; `tests/browser/test_dashboards.py` checks the view
from a fresh profile).

With MLflow's basic auth (the compose stack, docker-compose.yml): `python -m
deployments.mlflow_ui server --app-name basic-auth <options>` is `mlflow server --app-name
basic-auth <options>` (its configuration checks and admin account before the workers start)
with the basic-auth app behind the middleware; `mlflow server --app-name greylab` with
`GREYLAB_MLFLOW_BASE_APP=mlflow.server.auth:create_app` serves the same app, but MLflow then
leaves the admin account to each worker (`tests/integration/test_mlflow_auth_view.py` runs
both)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

STORAGE_KEY = "mlflow.workflowType_v1"
VIEW = "machine_learning"
APP_NAME = "greylab"
BASE_APP_ENV = "GREYLAB_MLFLOW_BASE_APP"
DEFAULT_BASE_APP = "mlflow.server.fastapi_app:app"
BASIC_AUTH = "basic-auth"  # MLflow's `mlflow.app` entry point of its basic-auth server
BASIC_AUTH_APP = "mlflow.server.auth:create_app"

_KEY, _VALUE = json.dumps(STORAGE_KEY), json.dumps(json.dumps(VIEW))
SCRIPT = (
    f"<script>try{{if(localStorage.getItem({_KEY})===null)localStorage.setItem({_KEY},{_VALUE})}}"
    "catch(e){}</script>"
).encode()

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def inject(html: bytes) -> bytes:
    """`html` with the default-view script first in its `<head>` (unchanged without one)."""
    head = html.find(b"<head>")
    if head < 0:
        return html
    end = head + len(b"<head>")
    return html[:end] + SCRIPT + html[end:]


class MachineLearningView:
    """ASGI middleware: HTML responses (MLflow's index page) get `SCRIPT`; everything else
    (API calls, artifacts, the bundle) passes through untouched and unbuffered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []  # the start of an HTML response, until its body is complete
        body: list[bytes] = []

        async def patched(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower(): v for k, v in message.get("headers", [])}
                html = names.get(b"content-type", b"").startswith(b"text/html")
                if html and b"content-encoding" not in names:
                    held.append(message)
                    return
            elif message["type"] == "http.response.body" and held:
                body.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                page = inject(b"".join(body))
                start = held.pop()
                headers = [(k, v) for k, v in start.get("headers", [])
                           if k.lower() != b"content-length"]  # fmt: skip
                headers.append((b"content-length", str(len(page)).encode()))
                await send({**start, "headers": headers})
                await send({"type": "http.response.body", "body": page})
                return
            await send(message)

        await self.app(scope, receive, patched)


def create_app() -> MachineLearningView:
    """The server app (a factory: uvicorn builds it in each worker, after `mlflow server` has
    set up the stores): MLflow's app (or `$GREYLAB_MLFLOW_BASE_APP`, `module:attribute`)
    behind the middleware. A base that is a factory function is called, e.g.
    `mlflow.server.auth:create_app`, MLflow's basic-auth app (its `mlflow.app` entry point
    `basic-auth`), which returns its FastAPI app under uvicorn."""
    import importlib
    import types

    module, _, attribute = os.environ.get(BASE_APP_ENV, DEFAULT_BASE_APP).partition(":")
    base = getattr(importlib.import_module(module), attribute)
    if isinstance(base, types.FunctionType):
        base = base()
    return MachineLearningView(base)


def main(argv: list[str] | None = None) -> None:
    """`mlflow <argv>` (normally `server ...`) with this module's app as the server app.

    MLflow chooses a custom app by an installed `mlflow.app` entry point (greylab installs
    `greylab`); the launcher hands `mlflow server` the app directly, so it works from a
    checkout that was not installed too (the compose MLflow image has only this module).
    `--app-name basic-auth` runs MLflow's basic-auth server (its checks and admin account
    made before the workers start, as `mlflow server --app-name basic-auth` does) with
    MLflow's basic-auth app behind this module's middleware (`BASIC_AUTH_APP` as the base
    app). No other `--app-name`; only the default uvicorn server is supported."""
    import mlflow.server as server
    from mlflow.cli import cli

    run_server, find_app = server._run_server, server._find_app

    def run_with_view(**options: Any) -> Any:
        name = options.get("app_name")
        if name not in (None, BASIC_AUTH):
            raise SystemExit(
                f"deployments.mlflow_ui: --app-name {name} is not supported here "
                f"(only {BASIC_AUTH})"
            )
        if options.get("gunicorn_opts") or options.get("waitress_opts"):
            raise SystemExit("deployments.mlflow_ui: only the default uvicorn server is supported")
        if name == BASIC_AUTH:
            os.environ[BASE_APP_ENV] = BASIC_AUTH_APP  # inherited by the uvicorn workers
        return run_server(**{**options, "app_name": name or APP_NAME})

    def find(name: str) -> str:
        ours = name in (APP_NAME, BASIC_AUTH)
        return "deployments.mlflow_ui:create_app" if ours else str(find_app(name))

    server._run_server = run_with_view
    server._find_app = find  # type: ignore[assignment]
    cli.main(args=sys.argv[1:] if argv is None else argv, prog_name="mlflow")


if __name__ == "__main__":
    main()

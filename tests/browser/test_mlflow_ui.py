"""The assumptions behind `deployments/mlflow_ui.py`, checked without a browser: the installed
MLflow UI bundle still keeps its workflow type under the localStorage entry the server's
script fills in, with `genai` as its default, and the middleware puts that script first in
the page's head and leaves every other response alone. (The browser test in
`test_dashboards.py` checks the view itself from a fresh profile.)"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import mlflow
import pytest

from deployments.mlflow_ui import SCRIPT, STORAGE_KEY, VIEW, MachineLearningView, inject

BUNDLE = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"


def _bundle() -> str:
    (main,) = BUNDLE.glob("main.*.js")
    return main.read_text(encoding="utf-8")


def test_the_installed_mlflow_ui_reads_the_workflow_type_from_this_storage_entry() -> None:
    text = _bundle()
    hook = re.search(r'key:"mlflow\.workflowType",version:(\d+),initialValue:(\w+)', text)
    assert hook, "the MLflow UI no longer keeps mlflow.workflowType in localStorage"
    assert STORAGE_KEY == f"mlflow.workflowType_v{hook.group(1)}"
    # the storage helper names the entry `<key>_v<version>` and stores JSON
    assert re.search(r"=\(e,t\)=>`\$\{e\}_v\$\{t\}`", text)
    # its default is the GenAI view, which is why the server must set one
    assert re.search(rf"const {hook.group(2)}=\w+\.GENAI", text)
    assert 'MACHINE_LEARNING="machine_learning"' in text and VIEW == "machine_learning"


def test_the_script_goes_first_in_the_head_and_only_fills_an_empty_entry() -> None:
    page = b"<!doctype html><html><head><title>MLflow</title></head><body></body></html>"
    out = inject(page)
    assert out.startswith(b"<!doctype html><html><head><script>")
    assert out.replace(SCRIPT, b"") == page
    assert b'localStorage.getItem("mlflow.workflowType_v1")===null' in SCRIPT
    assert json.dumps(json.dumps(VIEW)).encode() in SCRIPT  # stored as JSON, as the UI reads it
    assert inject(b"no head here") == b"no head here"


def _serve(content_type: bytes, chunks: list[bytes], method: str = "GET") -> tuple[Any, bytes]:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        size = str(sum(map(len, chunks))).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type), (b"content-length", size)]})  # fmt: skip
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk,
                        "more_body": i < len(chunks) - 1})  # fmt: skip

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request"}

    scope = {"type": "http", "method": method, "path": "/"}
    asyncio.run(MachineLearningView(app)(scope, receive, send))
    headers = dict(sent[0]["headers"])
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert int(headers[b"content-length"]) == len(body)
    return sent, body


def test_html_pages_get_the_script_with_a_correct_length_other_responses_pass() -> None:
    _, body = _serve(b"text/html; charset=utf-8", [b"<html><head>", b"</head></html>"])
    assert body == b"<html><head>" + SCRIPT + b"</head></html>"
    sent, body = _serve(b"application/json", [b'{"a":', b"1}"])
    assert body == b'{"a":1}' and len(sent) == 3  # streamed through, chunk by chunk
    _, body = _serve(b"text/html", [b"<html><head></head></html>"], method="POST")
    assert body == b"<html><head></head></html>"


def test_mlflow_finds_the_greylab_app_by_its_entry_point() -> None:
    """`mlflow server --app-name greylab` looks the app up among the installed `mlflow.app`
    entry points (MLflow's own loader, `mlflow.server._find_app`) and runs it as a factory."""
    from mlflow.server import _find_app, _is_factory

    app = _find_app("greylab")
    assert app == "deployments.mlflow_ui:create_app" and _is_factory(app)


@pytest.mark.slow
@pytest.mark.integration
def test_mlflow_server_with_app_name_greylab_serves_the_default_view(tmp_path: Path) -> None:
    """The real `mlflow server --app-name greylab` (MLflow's command, its app loader and
    uvicorn's factory mode): the page carries the default-view script, the API answers."""
    import os
    import urllib.request

    from tests.integration.services import BIN, free_port, service

    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    argv = [str(BIN / "mlflow"), "server", "--app-name", "greylab", "--host", "127.0.0.1",
            "--port", str(port), "--backend-store-uri", f"sqlite:///{tmp_path / 'm.db'}",
            "--artifacts-destination", str(tmp_path / "artifacts"), "--workers", "1"]  # fmt: skip
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with service(argv, health=f"{uri}/health", log=tmp_path / "mlflow.log", env=env):
        with urllib.request.urlopen(f"{uri}/", timeout=30) as response:
            page = response.read()
        request = urllib.request.Request(
            f"{uri}/api/2.0/mlflow/experiments/search", data=b'{"max_results": 5}',
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as response:
            experiments = json.load(response)["experiments"]
    assert SCRIPT in page and page.index(SCRIPT) < page.index(b"</head>")
    assert [e["name"] for e in experiments] == ["Default"]

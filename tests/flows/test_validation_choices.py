"""The validation form offers the registered greylab models as choices, read from MLflow when
the deployment is built (`deployments.serve.build_deployments`), and falls back to free text
with the name's pattern when MLflow is down, silent or has none; the settings check every
name either way (tests/flows/test_validation_settings.py: hostile names)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from flows.validation.settings import MODEL_NAME, ModelValidation

REGISTERED = ["press-M3", "drive-emps", "press-M1", "other-model", "press-bad_"]


def _model_field(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["definitions"]["ModelValidation"]["properties"]["model"])


def _served_form() -> tuple[dict[str, Any], float]:
    """The model field of the model-validation deployment as `greylab serve` builds it, and
    how long building it took."""
    from deployments.serve import build_deployments

    started = time.monotonic()
    (deployment,) = build_deployments(["model-validation"])
    return _model_field(deployment._parameter_openapi_schema.model_dump()), (
        time.monotonic() - started
    )


def _register(uri: str) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    for name in REGISTERED:
        client.create_registered_model(name)


def _free_text(field: dict[str, Any]) -> None:
    assert "enum" not in field, field
    assert field["pattern"] == MODEL_NAME.pattern
    assert "choices" not in field["description"]


def test_a_local_store_with_registered_models_gives_the_choices(tmp_path, monkeypatch) -> None:
    from prefect.utilities.callables import parameter_schema

    from flows.validation.flow import model_validation

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    _register(uri)
    field, _ = _served_form()
    # greylab's names only, sorted; a name the settings would refuse is not offered
    assert field["enum"] == ["drive-emps", "press-M1", "press-M3"]
    assert "the models registered when the form was made" in field["description"]
    # outside a deployment's build (the flow imported by the command line): no MLflow read
    _free_text(_model_field(parameter_schema(model_validation.fn).model_dump()))
    # the settings still check every name (a choice is no check)
    for hostile in ("other-model", "press-bad_", "models:/press-M3/1", "press-M3/../x"):
        with pytest.raises(ValidationError) as caught:
            ModelValidation.model_validate({"model": hostile, "data": __file__})
        assert "model" in {str(e["loc"][0]) for e in caught.value.errors()}


def test_an_empty_or_missing_local_store_gives_free_text(tmp_path, monkeypatch) -> None:
    missing = tmp_path / "none.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{missing}")
    field, _ = _served_form()
    _free_text(field)
    assert not missing.exists()  # reading made no store


def test_an_mlflow_that_does_not_answer_costs_seconds_and_gives_free_text(monkeypatch) -> None:
    """A server that accepts the connection and never answers (the worst case: no refusal),
    and a port where nothing listens: the form is built within the time bound, free text."""
    from flows.validation.choices import TIMEOUT

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections queue up; nothing reads or answers
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{silent.getsockname()[1]}")
        field, took = _served_form()
    _free_text(field)
    assert TIMEOUT * 0.8 < took < TIMEOUT + 5, took  # waited for the answer, then gave up
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: refused
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
        field, took = _served_form()
    _free_text(field)
    assert took < TIMEOUT + 5, took


@pytest.mark.slow
@pytest.mark.integration
def test_an_mlflow_server_with_registered_models_gives_the_choices(tmp_path: Path,
                                                                   monkeypatch) -> None:  # fmt: skip
    from tests.integration.services import mlflow_server

    with mlflow_server(tmp_path) as uri:
        _register(uri)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        field, took = _served_form()
    assert field["enum"] == ["drive-emps", "press-M1", "press-M3"], field
    assert took < 60, took


def test_a_redirect_is_not_followed_with_the_credentials(monkeypatch) -> None:
    """An MLflow URL that redirects elsewhere: the listing is not followed (urllib would send
    the Authorization header on to any host), the form is free text, and the other host never
    sees a request."""
    import http.server
    import threading

    from flows.validation.choices import registered_names

    seen: list[str | None] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"registered_models": [{"name": "press-M3"}]}')

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)
    target = f"http://127.0.0.1:{other.server_address[1]}/steal"

    class Redirect(Elsewhere):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", target)
            self.end_headers()

    mlflow = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (other, mlflow)]
    for thread in threads:
        thread.start()
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "secret")
        uri = f"http://127.0.0.1:{mlflow.server_address[1]}"
        assert registered_names(MODEL_NAME, uri) == []
        assert seen == []
    finally:
        for server in (other, mlflow):
            server.shutdown()
            server.server_close()


def test_a_local_store_locked_by_another_process_gives_free_text_within_the_bound(
    tmp_path, monkeypatch
) -> None:
    """The store is read under its lock, as every greylab process opens it: a store another
    process holds (creating or upgrading it) is not read meanwhile; the form waits at most
    the bound and offers free text."""
    from flows.validation import choices

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    _register(uri)
    monkeypatch.setattr(choices, "DEADLINE", 1.0)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(db.with_name(db.name + ".lock"))],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        field, _ = _served_form()
        assert time.monotonic() - started < 30
        _free_text(field)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    field, _ = _served_form()  # released: the choices again
    assert field["enum"] == ["drive-emps", "press-M1", "press-M3"]

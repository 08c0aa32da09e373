"""Every deployment's custom-run form in a real browser: optional settings are plain fields
(no 'Property is type "None"' toggle, Prefect UI's `SchemaFormPropertyNull`), and each form
that opens prefilled (press, drive, inverse, ingest) submits as it is: the server accepts it
and the flow's settings model reads the submitted parameters (None back where the form
sent null or left a field out).

Real parts: a Prefect server with its UI, the five deployments of `deployments/prefect.yaml`
registered from `deployments.serve.build_deployments` (not served: the submitted runs stay
scheduled; `test_dashboards.py` runs a form's submission to the end), Debian's Chromium from
a fresh profile; the validation form's Model is a choice of the models registered in MLflow
before the deployments were made (`flows/validation/choices.py`). Screenshots: `build/browser-shots/form-*.png`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.servers import ROOT, chromium, fresh_page, shot
from tests.browser.test_dashboards import _choose, _field, _get, _post, _refused
from tests.integration.services import prefect_server, with_parent

pytestmark = pytest.mark.browser

#: deployment -> the flow's parameter (None: the form has required fields without default)
FORMS = {
    "press-uncertainty/press-uncertainty": "study",
    "drive-structure-search/drive-structure-search": "study",
    "inverse-simulation/inverse-simulation": "study",
    "ingest-lab-data/ingest-lab-data": "settings",
    "model-validation/model-validation": None,
}
MODELS = ["press-M3", "drive-emps"]
REGISTER = (
    "from deployments.serve import build_deployments\nfor d in build_deployments(): d.apply()"
)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[str]:
    from mlflow import MlflowClient

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"  # models registered before the forms are made
    for name in MODELS:
        MlflowClient(tracking_uri=store, registry_uri=store).create_registered_model(name)
    with prefect_server(tmp_path, ui=True) as url:
        env = {**os.environ, "PREFECT_API_URL": url, "GREYLAB_HOME": str(tmp_path / "home"),
               "MLFLOW_TRACKING_URI": store}  # fmt: skip
        registered = subprocess.run(with_parent([sys.executable, "-c", REGISTER]), cwd=ROOT,
                                    env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert registered.returncode == 0, registered.stderr[-3000:]
        yield url


def _runs(api: str, deployment_id: str) -> list[dict[str, Any]]:
    body = {"deployments": {"id": {"any_": [deployment_id]}}, "limit": 200}  # + scheduled
    return [r for r in _post(f"{api}/flow_runs/filter", body) if not r.get("auto_scheduled")]


def _submitted(api: str, deployment_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = _runs(api, deployment_id)
        if runs:
            assert len(runs) == 1, "one submission, one run"
            return runs[0]
        time.sleep(1)
    pytest.fail("the submitted run never appeared")


def _submit(page: Any, api: str, deployment_id: str, slug: str) -> None:
    """Submit the form and wait for the deployment's runs tab. A click that lands while the
    form's check of an earlier value is still in flight is dropped by the UI (seen after the
    refused "abc" on a loaded machine, as in `test_dashboards._refused`), so a user clicks
    again: up to 4 clicks, each given 15 s, and never once a run was made (`_submitted` then
    checks there is exactly one)."""
    for _ in range(4):
        page.get_by_role("button", name="Submit").click()
        try:
            page.wait_for_url(re.compile(r".*tab=Runs"), timeout=15_000)
            return
        except Exception:  # playwright's TimeoutError: submitted but slow, or dropped
            if _runs(api, deployment_id):
                page.wait_for_url(re.compile(r".*tab=Runs"), timeout=60_000)
                return
    shot(page, f"form-{slug}-SUBMIT-FAILED")
    pytest.fail(f"{slug}: no run after 4 submits; url {page.url}")


def test_no_none_toggle_and_the_prefilled_forms_submit(api: str) -> None:
    from deployments.serve import load_definitions, load_flow

    entries = {f"{load_flow(d['entrypoint']).name}/{d['name']}": d for d in load_definitions()}
    ui = api.removesuffix("/api")
    with chromium() as browser:
        page = fresh_page(browser)
        page.set_viewport_size({"width": 1400, "height": 5000})  # the whole form on a shot
        for name, key in FORMS.items():
            slug = name.split("/")[1]
            deployment = _get(f"{api}/deployments/name/{name}")
            page.goto(f"{ui}/deployments/deployment/{deployment['id']}/run")
            page.wait_for_load_state("networkidle")
            page.get_by_role("button", name="Submit").wait_for()
            text = page.inner_text("body")
            shot(page, f"form-{slug}")
            assert "Property is type" not in text, f"{slug}: a None toggle on the form"
            assert page.locator(".schema-form-property-null").count() == 0, slug
            if key is None:  # validation: the registered models are the Model's choices
                assert "(Optional)" in _field(page, "Sensor Sheet").inner_text()
                _choose(page, "Model", "press-M3")
                shot(page, "form-model-validation-choice")
                continue
            if slug == "press-uncertainty":  # the sensor count: a number that cannot be empty
                sensors = _field(page, "N Sensors").locator("input")
                assert sensors.input_value() == "2"
                _refused(page, sensors, "abc", "'n_sensors' is a required property",
                         "form-press-text-in-n-sensors")  # fmt: skip
                for _ in range(3):  # the default back, as a user would type it and move on
                    sensors.fill("2")  # (a re-render of the form's last check may eat it)
                    sensors.press("Tab")
                    page.wait_for_timeout(500)
                    if sensors.input_value() == "2":
                        break
                assert sensors.input_value() == "2"
            _submit(page, api, str(deployment["id"]), slug)
            run = _submitted(api, str(deployment["id"]))
            parameters = run["parameters"][key]
            flow = load_flow(entries[name]["entrypoint"])
            settings = flow.validate_parameters({key: parameters})[key]
            expected = type(settings)(**(entries[name].get("parameters") or {}).get(key, {}))
            other = {k: (getattr(settings, k), getattr(expected, k)) for k in
                     type(settings).model_fields if getattr(settings, k) != getattr(expected, k)}  # fmt: skip
            assert not other, (
                f"{slug}: the prefilled form ran other settings (sent, default): {other}"
            )

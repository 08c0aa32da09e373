"""The registered model names the validation form offers as choices, read from MLflow when a
deployment is built (`greylab serve`: `deployments.serve.build_deployments`, as the worker's
limits are read), never when the flow is imported (the command line does not wait for MLflow).

A short timeout bounds the read (an MLflow server that does not answer costs at most
`TIMEOUT` seconds per request and `DEADLINE` in all); MLflow down, unreadable, or without a
greylab model: no choices, and the form's Model field stays free text with the name's pattern.
Only names that pass the settings' own check (`MODEL_NAME`) are offered; the settings check
every submitted name again (a choice is a convenience, not the check).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.parse
import urllib.request

TIMEOUT = 3.0  # seconds per request to an MLflow server
DEADLINE = 6.0  # seconds for every page of the listing together


def registered_names(pattern: re.Pattern[str], tracking_uri: str | None = None) -> list[str]:
    """The registered model names at the tracking URI (default: greylab's) that match
    `pattern`, sorted; [] when MLflow cannot be read within the time bounds."""
    from runtime.settings import load_settings

    uri = tracking_uri or load_settings().tracking_uri
    try:
        if uri.startswith(("http://", "https://")):
            names = _over_http(uri)
        else:
            names = _from_local_store(uri)
    except Exception:  # down, refused, slow, not MLflow, no permission: free text
        return []
    return sorted({n for n in names if isinstance(n, str) and pattern.fullmatch(n)})


class _Refuse(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed (urllib would send the credentials on to any host)."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # urllib then raises HTTPError for the 3xx: no choices, free text


_NO_REDIRECTS = urllib.request.build_opener(_Refuse)


def _over_http(uri: str) -> list[str]:
    """MLflow's REST listing (`registered-models/search`), with the credentials MLflow's
    client takes from the environment (basic auth or a token)."""
    headers = {"Accept": "application/json"}
    user, password = (
        os.environ.get("MLFLOW_TRACKING_USERNAME"),
        os.environ.get("MLFLOW_TRACKING_PASSWORD"),
    )
    if user and password:
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {pair}"
    elif token := os.environ.get("MLFLOW_TRACKING_TOKEN"):
        headers["Authorization"] = f"Bearer {token}"
    names: list[str] = []
    page: str | None = None
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        query = {"max_results": "1000", **({"page_token": page} if page else {})}
        url = f"{uri.rstrip('/')}/api/2.0/mlflow/registered-models/search?"
        request = urllib.request.Request(url + urllib.parse.urlencode(query), headers=headers)
        remaining = max(0.1, min(TIMEOUT, deadline - time.monotonic()))
        with _NO_REDIRECTS.open(request, timeout=remaining) as response:
            body = json.load(response)
        names += [m.get("name") for m in body.get("registered_models", [])]
        page = body.get("next_page_token")
        if not page:
            return names
    raise TimeoutError(f"listing the registered models took over {DEADLINE} s")


def _from_local_store(uri: str) -> list[str]:
    """A local store (SQLite file, or a folder), read only when it exists (reading would make
    it); another database (e.g. PostgreSQL, whose connection may hang): no choices."""
    if uri.startswith("sqlite:///"):
        path = uri.removeprefix("sqlite:///")
    elif uri.startswith("file:"):
        path = urllib.parse.urlparse(uri).path
    elif "://" not in uri:
        path = uri
    else:
        return []
    if not os.path.exists(path):
        return []
    from mlflow import MlflowClient

    def names() -> list[str]:
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        return [m.name for m in client.search_registered_models(max_results=1000)]

    if not uri.startswith("sqlite:"):
        return names()
    from pathlib import Path

    from runtime.stores import check_sqlite_file, store_lock

    # MLflow upgrades an older store when a client opens it: under the store's lock, as every
    # greylab process opens it (`runtime.stores.tracking_client`); a store locked longer than
    # the bound (another process creating or upgrading it) gives no choices
    with store_lock(Path(path), timeout=DEADLINE):
        check_sqlite_file(Path(path), "MLflow store")
        return names()

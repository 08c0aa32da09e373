"""Configuration by environment, in one place, with embedded defaults.

| variable               | meaning                                   | default                           |
|------------------------|-------------------------------------------|-----------------------------------|
| `GREYLAB_HOME`         | runtime state folder (never committed)    | `./.greylab`                      |
| `MLFLOW_TRACKING_URI`  | MLflow tracking store or server           | `sqlite:///$GREYLAB_HOME/mlflow.db` |
| `GREYLAB_ARTIFACT_ROOT`| artifact root for experiments we create   | `$GREYLAB_HOME/mlartifacts` (local stores only) |
| `GREYLAB_DATA_ROOT`    | Parquet datasets, inbox, archive, quarantine | `$GREYLAB_HOME/data`           |
| `GREYLAB_INBOX`        | folder scheduled ingestion reads (worker-side, never a flow parameter) | `$GREYLAB_DATA_ROOT/inbox` |
| `GREYLAB_MAX_FILE_BYTES` / `GREYLAB_MAX_FILE_ROWS` | per-file limits of lab files (`schemas/lab_files.py`) | 256 MiB / 2,000,000 |
| `PREFECT_API_URL`      | Prefect server; unset = the CLI's shared local server (`runtime.local_server`), a temporary one in-process | unset |
| `GREYLAB_SERVER_IDLE`  | seconds the CLI's shared local Prefect server stays after its last request; 0 = a temporary server per command | `120` |
| `GREYLAB_WARM` / `GREYLAB_WARM_IDLE` | 0 = every command in-process, no warm command server (`runtime.warm`); seconds that server stays after its last command | on / `120` |
| `PREFECT_HOME`         | Prefect's own state                       | `$GREYLAB_HOME/prefect`           |
| `GREYLAB_STORE_TEMPLATES` | folder of the empty, migrated MLflow and Prefect stores a fresh home copies (`runtime.store_templates`); `0` = off | `$XDG_CACHE_HOME/greylab/store-templates` (`~/.cache/...`) |
| `GREYLAB_DASK_ADDRESS` | existing Dask scheduler (`tcp://…`)       | unset = local cluster when asked  |
| `GREYLAB_CACHE_DIR`    | cross-run result cache of the study tasks (`tasks/cache.py`) | `$GREYLAB_HOME/cache` |
| `GREYLAB_CACHE_DAYS`   | days a cached result stays valid          | `30`                              |
| `GREYLAB_PROJECT_DIR`  | project folder for deployed flow runs (pull step of `deployments/prefect.yaml`) | unset (`greylab serve` runs in place) |
| `GREYLAB_ALLOWED_DATA_ROOTS` | folders (os.pathsep-separated) besides the data root whose files a flow's `data` may name (`flows/data_refs.py`) | unset |
| `GREYLAB_ALLOWED_DATA_FILES` | files the CLI user typed, allowed for that process and its workers (set by the CLI) | unset |
| `GREYLAB_ALLOWED_MODELS` / `GREYLAB_ALLOWED_SYSTEMS` | plugin press models / inverse systems (`module:attr`, comma-separated) the worker allows | unset |

`apply_environment()` must run before `prefect` is imported (the CLI does it first), because
Prefect reads its settings at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: the data root when `GREYLAB_DATA_ROOT` is unset: this folder of `GREYLAB_HOME`
DATA_DIR = "data"
#: the inbox when `GREYLAB_INBOX` is unset: this folder of the data root
INBOX_DIR = "inbox"
#: how help texts state the defaults of the folders (what `load_settings` does)
DATA_ROOT_DEFAULT = f"$GREYLAB_HOME/{DATA_DIR}"
INBOX_DEFAULT = f"$GREYLAB_DATA_ROOT/{INBOX_DIR}"


@dataclass(frozen=True)
class Settings:
    home: Path
    tracking_uri: str
    artifact_root: str | None
    data_root: Path
    inbox: Path
    prefect_api_url: str | None
    dask_address: str | None
    cache_dir: Path
    cache_days: float

    @property
    def local_tracking(self) -> bool:
        return self.tracking_uri.startswith(("sqlite:", "file:")) or "://" not in self.tracking_uri


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    home = Path(env.get("GREYLAB_HOME", ".greylab")).resolve()
    tracking_uri = env.get("MLFLOW_TRACKING_URI") or f"sqlite:///{home / 'mlflow.db'}"
    local = tracking_uri.startswith(("sqlite:", "file:"))
    artifact_root = env.get("GREYLAB_ARTIFACT_ROOT") or (
        (home / "mlartifacts").as_uri() if local else None
    )
    data_root = Path(env.get("GREYLAB_DATA_ROOT") or home / DATA_DIR).resolve()
    return Settings(
        home=home,
        tracking_uri=tracking_uri,
        artifact_root=artifact_root,
        data_root=data_root,
        inbox=Path(env.get("GREYLAB_INBOX") or data_root / INBOX_DIR).resolve(),
        prefect_api_url=env.get("PREFECT_API_URL") or None,
        dask_address=env.get("GREYLAB_DASK_ADDRESS") or None,
        cache_dir=Path(env.get("GREYLAB_CACHE_DIR") or home / "cache").resolve(),
        cache_days=_positive_float(env, "GREYLAB_CACHE_DAYS", 30.0),
    )


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        from methods.errors import InputError

        raise InputError(f"environment variable {name}={raw[:40]!r}: expected a positive number")
    return value


def apply_environment() -> Settings:
    """Create the runtime folders and export defaults Prefect and MLflow read at import."""
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.data_root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MLFLOW_TRACKING_URI", settings.tracking_uri)
    os.environ.setdefault("PREFECT_HOME", str(settings.home / "prefect"))
    # Ephemeral Prefect server (no PREFECT_API_URL): quiet, and give it time to start.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    # The console shows greylab's own progress and summaries; Prefect's console logs (which
    # print tracebacks for failed runs, even for bad input) are hidden unless asked for.
    # The Prefect UI still receives every log through the API handler.
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no network here
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    return settings

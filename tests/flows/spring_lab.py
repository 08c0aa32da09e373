"""A lab of its own for the campaign-file tests (issue 17): a spring read by sensors `tip` and
`lever`, a plugin model `labspring:spring` written to a folder on sys.path and allowed on the
"worker" through GREYLAB_ALLOWED_MODELS, and its press tables."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

MODEL = "labspring:spring"
PLUGIN = '''\
import casadi as ca
import numpy as np


class Spring:
    """tip = F / k, lever = r F / k [um], F in N: a linear spring and its lever."""

    name = "spring"
    sensors = ("tip", "lever")
    parameters = {"k": 100.0, "r": 1.0}
    bounds = {"k": (1.0, 1e4), "r": (0.01, 100.0)}

    def response(self, p, forces):
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            return ca.horzcat(forces / p[0], p[1] * forces / p[0])
        q = np.asarray(forces, float)
        return np.column_stack([q / p[0], p[1] * q / p[0]])


spring = Spring()
'''


def install_spring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow: bool = True) -> None:
    """The plugin importable from `tmp_path/plugins` (not the data root's folder: ingestion
    refuses folders on sys.path), allowed on the worker when `allow`."""
    from models import registry

    folder = tmp_path / "plugins"
    folder.mkdir(exist_ok=True)
    (folder / "labspring.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    if allow:
        monkeypatch.setenv(registry.ALLOWED_ENV, MODEL)
    else:
        monkeypatch.delenv(registry.ALLOWED_ENV, raising=False)
    sys.modules.pop("labspring", None)


def spring_frame(rng: np.random.Generator, k: float = 120.0, r: float = 0.5) -> pd.DataFrame:
    """Four loading/unloading series, noise 0.05 um: `tip` = F/k, `lever` = r F/k."""
    setpoints = np.r_[np.linspace(100, 1000, 10), np.linspace(900, 100, 9)]
    rows = []
    for series in range(4):
        for step, setpoint in enumerate(setpoints):
            force = setpoint + rng.normal(0, 0.5)
            for sensor, value in (("tip", force / k), ("lever", r * force / k)):
                rows.append((series, step, setpoint, force, sensor, value + rng.normal(0, 0.05)))
    columns = ["series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um"]
    return pd.DataFrame(rows, columns=columns)


def write_sheet(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"sensor": ["tip", "lever"], "sigma_um": [0.05, 0.05]}).to_csv(path, index=False)
    return path


CONFIG = f"""
[spring-1]
study = "press"
models = ["{MODEL}"]
sensor_sheet = "sheets/spring.csv"
n_sensors = 2
tests = 6
"""

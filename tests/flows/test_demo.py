"""The README's first command: `greylab demo` runs the three studies on embedded defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_runs_the_three_studies_and_prints_their_results(tmp_path: Path) -> None:
    env = {**os.environ, "GREYLAB_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)  # PREFECT_API_URL: the shared test server (conftest)
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", "demo", "--tests", "10", "--generations", "1", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    verdicts = {v["model"]: v["verdict"] for v in result["press"]["verdicts"]}
    # the twin's truth is M3 (the press tests' oracle): only the true friction model passes
    assert verdicts["M3"] == "passes" and "passes" not in (verdicts["M1"], verdicts["M2"])
    (crane,) = result["inverse"]["runs"]
    assert crane["system"] == "trolley_crane" and crane["status"] == "ok"
    assert crane["max_constraint_violation"] < 1e-8
    assert result["drive"]["generations"] == 1 and result["drive"]["best_structure"]
    evidence = result["drive"]["evidence"]  # intervals and residual tests; no rival fits
    assert evidence["parameters"] and not evidence.get("rivals")
    assert (tmp_path / "home" / "mlflow.db").exists()

"""A cached press result never outlives the code or data that made it (issue: correctness
first). End to end through the command line, with a plugin model and a table of our own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli import main

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = """\
import casadi as ca
import numpy as np

SCALE = {scale}


class Spring:
    \"\"\"u_a = SCALE q / k, u_b = r SCALE q / k [um], q in N.\"\"\"

    name = "spring"
    sensors = ("a", "b")
    parameters = {{"k": 100.0, "r": 1.0}}
    bounds = {{"k": (1.0, 1e4), "r": (0.01, 100.0)}}

    def response(self, p, forces):
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            return ca.horzcat(SCALE * forces / p[0], p[1] * SCALE * forces / p[0])
        q = np.asarray(forces, float)
        return np.column_stack([SCALE * q / p[0], p[1] * SCALE * q / p[0]])


spring = Spring()
"""


def write_table(path: Path, k: float, seed: int) -> None:
    """Four loading/unloading series of a spring of stiffness k (r = 0.5), sigma 0.05 um."""
    rng = np.random.default_rng(seed)
    setpoints = np.r_[np.linspace(100, 1000, 10), np.linspace(900, 100, 9)]
    rows = []
    for series in range(4):
        for step, f in enumerate(setpoints):
            force = f + rng.normal(0, 0.5)
            for sensor, value in (("a", force / k), ("b", 0.5 * force / k)):
                rows.append((series, step, f, force, sensor, value + rng.normal(0, 0.05)))
    columns = ["series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um"]
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    sheet = pd.DataFrame({"sensor": ["a", "b"], "sigma_um": [0.05, 0.05]})
    sheet.to_csv(path.with_suffix(".sensors.csv"), index=False)


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("GREYLAB_CACHE_DIR", raising=False)
    (tmp_path / "springmod.py").write_text(PLUGIN.format(scale=1))
    monkeypatch.syspath_prepend(str(tmp_path))
    write_table(tmp_path / "t.csv", k=120.0, seed=0)
    yield tmp_path
    sys.modules.pop("springmod", None)


def detect(lab: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    argv = ["press", "detect", "--data", str(lab / "t.csv"), "--sheet",
            str(lab / "t.sensors.csv"), "--models", "springmod:spring", "--sensors", "2",
            "--tests", "10", "--json", *extra]  # fmt: skip
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def k_of(result: dict) -> float:
    return result["verdicts"][0]["parameters"]["k"]


def test_cache_hit_reported_then_edits_recompute(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = detect(lab, capsys)
    # the noise of 0.05 um on u ~ 1..8 um gives s.e.(k) ~ 0.1: 120 +- 1 is a loose bound
    assert abs(k_of(first) - 120.0) < 1.0
    assert first["cache"]["status"] == "miss"

    second = detect(lab, capsys)
    assert second["cache"]["status"] == "hit"
    assert "fit springmod:spring" in second["cache"]["cached"]
    assert k_of(second) == k_of(first)

    # a plugin edit: the model's displacements double, so k must double with them
    (lab / "springmod.py").write_text(PLUGIN.format(scale=2))
    edited = detect(lab, capsys)
    assert k_of(edited) == pytest.approx(2 * k_of(first), rel=1e-6)
    assert "fit springmod:spring" in edited["cache"]["computed"]

    # the table overwritten in place with a stiffer spring: new data, new estimate
    write_table(lab / "t.csv", k=150.0, seed=1)
    stiffer = detect(lab, capsys)
    assert abs(k_of(stiffer) - 2 * 150.0) < 2.0
    assert stiffer["cache"]["status"] == "miss"

    forced = detect(lab, capsys, "--no-cache")
    assert forced["cache"]["status"] == "miss"
    assert k_of(forced) == pytest.approx(k_of(stiffer), rel=1e-9)


def test_cache_use_is_tagged_in_mlflow(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow import MlflowClient

    from runtime.settings import load_settings

    detect(lab, capsys)
    cached = detect(lab, capsys)
    client = MlflowClient(load_settings().tracking_uri)
    parent = client.get_run(cached["parent_run_id"])
    assert parent.data.tags["greylab.cache"] == "hit"
    assert "fit springmod:spring" in parent.data.tags["greylab.cached_steps"]
    assert parent.data.params["cache"] == "true"
    child = client.get_run(cached["verdicts"][0]["run_id"])
    assert child.data.tags["greylab.cache"] == "hit"


def test_cache_clear_command(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    detect(lab, capsys)
    assert main(["cache", "clear", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["files_removed"] > 0
    assert detect(lab, capsys)["cache"]["status"] == "miss"


def test_half_written_cache_entries_are_recomputed(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash while a result was written leaves a truncated cache file: the next run must
    recompute (a miss), never fail or return garbage."""
    from runtime.settings import load_settings

    first = detect(lab, capsys)
    entries = [p for p in load_settings().cache_dir.rglob("*") if p.is_file()]
    assert entries
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:50])
    again = detect(lab, capsys)
    assert again["cache"]["status"] == "miss"
    assert k_of(again) == pytest.approx(k_of(first), rel=1e-9)


@pytest.mark.slow
def test_a_changed_file_under_methods_recomputes(tmp_path: Path) -> None:
    """A temporary copy of the project whose methods/ gets an edit (as an upgrade would):
    separate processes, one cache; the edit must invalidate every numerical step."""
    copy = tmp_path / "project"
    for package in ("methods", "models", "schemas", "tasks", "flows", "deployments"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("*.pyc"))
    (copy / "springmod.py").write_text(PLUGIN.format(scale=1))
    write_table(tmp_path / "t.csv", k=120.0, seed=0)
    env = {**os.environ, "GREYLAB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(copy)}
    env.pop("MLFLOW_TRACKING_URI", None)  # PREFECT_API_URL: the shared test server (conftest)
    argv = [sys.executable, "-m", "flows.cli", "press", "detect", "--data",
            str(tmp_path / "t.csv"), "--sheet", str(tmp_path / "t.sensors.csv"),
            "--models", "springmod:spring", "--sensors", "2", "--tests", "10", "--json"]  # fmt: skip

    def run() -> dict:
        done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    probe = [sys.executable, "-c", "import methods; print(methods.__file__)"]
    where = subprocess.run(probe, cwd=copy, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip().startswith(str(copy))  # the copy is what runs

    assert run()["cache"]["status"] == "miss"
    assert run()["cache"]["status"] == "hit"
    core = copy / "methods" / "press" / "lsq" / "core.py"
    core.write_text(core.read_text() + "\n# a numerical fix would go here\n")
    after = run()["cache"]
    assert after["status"] == "miss", after

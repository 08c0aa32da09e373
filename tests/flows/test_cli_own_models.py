"""The CLI runs the models the API runs (issue 17): a model file in the current folder is
found without PYTHONPATH; `--model` is one option everywhere (repeatable, comma-separated,
`--models` as its alias); one-parameter models, more parameters than sensors and `--sensors
all` go through `press detect` with exit 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli import main

ROOT = Path(__file__).resolve().parents[2]
ONE_PARAMETER = '''
import casadi as ca


class Stiffness:
    """Only k: the lever ratio is known (0.8)."""

    name = "stiffness"
    parameters = {"k": 100.0}
    sensors = ("tip", "lever")

    def response(self, p, forces):
        return ca.horzcat(forces / p[0], 0.8 * forces / p[0])
'''


@pytest.fixture(autouse=True)
def _no_leaks(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main` allows the typed models for its process and makes its folder importable: give
    it a private allow-list, environment and search path, restored after each test."""
    from models import registry

    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    for name in (registry.ALLOWED_ENV, "PYTHONPATH"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.syspath_prepend(str(ROOT))  # undo restores the whole sys.path


@pytest.fixture
def spring_folder(tmp_path: Path) -> Path:
    """The worked example's model file and table, plus a one-parameter model, in a folder."""
    folder = tmp_path / "lab"
    shutil.copytree(ROOT / "examples" / "spring", folder, ignore=shutil.ignore_patterns("*.csv"))
    (folder / "stiffness.py").write_text(ONE_PARAMETER)
    subprocess.run([sys.executable, "make_table.py"], cwd=folder, check=True, capture_output=True)
    return folder


def test_a_model_file_in_the_current_folder_needs_no_pythonpath(
    spring_folder: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI")}
    env["GREYLAB_HOME"] = str(tmp_path / "home")
    greylab = str(Path(sys.executable).parent / "greylab")
    done = subprocess.run(
        [greylab, "press", "design", "--data", "spring.csv", "--model", "spring:Spring", "--json"],
        cwd=spring_folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["best"]["sensors"] == "tip,lever"


def test_model_option_is_repeatable_comma_separated_and_has_its_alias(
    spring_folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    monkeypatch.chdir(spring_folder)
    monkeypatch.syspath_prepend(str(spring_folder))
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    data = ["--data", "spring.csv", "--sheet", "spring.sensors.csv", "--json"]
    chosen = []
    for models in (["--model", "spring:Spring", "--model", "spring:StiffeningSpring"],
                   ["--models", "spring:Spring,spring:StiffeningSpring"],
                   ["--model", "spring:StiffeningSpring", "--design-model", "spring:Spring"]):  # fmt: skip
        assert main(["press", "design", *data, *models]) == 0
        out = json.loads(capsys.readouterr().out)
        chosen.append((out["model"], out["model_chosen_by"]))
    assert chosen == [("spring:StiffeningSpring", "most parameters")] * 2 + [
        ("spring:Spring", "setting")
    ]
    for value, message in (("many", "--sensors: expected a number or 'all'"),
                           ("-1", "n_sensors must lie between 1 and the 2")):  # fmt: skip
        assert main(["press", "design", *data, "--model", "spring:Spring", "--sensors", value]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.usefixtures("private_prefect")
def test_detect_runs_one_parameter_and_more_parameters_than_sensors_with_all_sensors(
    spring_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(spring_folder)
    monkeypatch.syspath_prepend(str(spring_folder))
    args = ["press", "detect", "--data", "spring.csv", "--sheet", "spring.sensors.csv",
            "--model", "stiffness:Stiffness,spring:StiffeningSpring", "--sensors", "all",
            "--tests", "4", "--json"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    verdicts = {v["model"]: v for v in out["verdicts"]}
    assert set(verdicts["stiffness:Stiffness"]["parameters"]) == {"k"}
    assert set(verdicts["spring:StiffeningSpring"]["parameters"]) == {"k", "r", "c"}
    assert out["sensors"] == ["tip", "lever"]  # three parameters from two sensors
    assert out["design"]["model"] == "spring:StiffeningSpring"

"""Code chosen by a string (issue 10): the registry checks an object's type before calling
anything, flow settings take plugin models only from the worker's allow-list (entry points
``greylab.models`` or ``GREYLAB_ALLOWED_MODELS``), experiment names cannot leave the store."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from methods.errors import InputError
from models import registry
from models.registry import allow_models, check_model_reference, resolve_model

PLUGIN = '''
CALLS = []


def factory():
    CALLS.append("factory")
    raise SystemExit("factory was called")


class Spring:
    """A linear spring read by two sensors (the issue-17 example)."""

    name = "spring"
    sensors = ("a", "b")

    def __init__(self):
        CALLS.append("Spring()")
        self.parameters = {"k": 1.0}

    def response(self, p, forces):
        return forces


class NeedsArgs:
    name = "n"
    sensors = ("a",)
    parameters = {"k": 1.0}

    def __init__(self, k):
        self.k = k

    def response(self, p, forces):
        return forces


INSTANCE = Spring()
'''


@pytest.fixture()
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A real plugin package on sys.path, plus an installed distribution whose entry point in
    group greylab.models names it (importlib.metadata finds the dist-info on sys.path)."""
    pkg = tmp_path / "hostile_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text(textwrap.dedent(PLUGIN))
    dist = tmp_path / "hostile_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[greylab.models]\nspring = hostile_plugin.models:Spring\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(registry.ALLOWED_ENV, raising=False)
    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    yield sys.modules.get("hostile_plugin.models")
    for name in ("hostile_plugin.models", "hostile_plugin"):
        sys.modules.pop(name, None)


def test_functions_are_refused_not_called() -> None:
    # os.abort would kill this test process if the registry called it
    with pytest.raises(InputError, match="builtin_function_or_method, not a model"):
        resolve_model("os:abort")
    with pytest.raises(InputError, match="is a module, not a model"):
        resolve_model("os:path")
    with pytest.raises(InputError, match="not instantiated"):
        resolve_model("subprocess:Popen")


def test_plugin_factories_are_not_called_classes_are_instantiated(plugin) -> None:
    with pytest.raises(InputError, match="is a function, not a model"):
        resolve_model("hostile_plugin.models:factory")
    module = sys.modules["hostile_plugin.models"]
    assert "factory" not in module.CALLS
    model = resolve_model("hostile_plugin.models:Spring")  # class with a no-arg constructor
    assert model.name == "spring" and model.parameters == {"k": 1.0}
    assert resolve_model("hostile_plugin.models:INSTANCE") is module.INSTANCE
    with pytest.raises(InputError, match="constructor without arguments"):
        resolve_model("hostile_plugin.models:NeedsArgs")
    assert resolve_model("spring").name == "spring"  # by entry-point name


def test_malformed_references_are_refused_before_importing() -> None:
    for ref in ["../../x:y", "os:", ":abort", "a b:c", "x" * 5000 + ":y"]:
        with pytest.raises(InputError) as info:
            resolve_model(ref)
        assert len(str(info.value)) < 400


def test_flow_settings_take_plugins_only_from_the_allow_list(plugin, monkeypatch) -> None:
    from flows.press.flow import PressStudy

    for ref in ["os:abort", "hostile_plugin.models:factory", "quarantine.evil:x"]:
        with pytest.raises(ValidationError, match="not allowed for flow runs"):
            PressStudy(models=["M1", ref])
    with pytest.raises(ValidationError, match="unknown model"):
        PressStudy(models=["M9"])
    assert "hostile_plugin" not in sys.modules or "factory" not in plugin.CALLS  # never imported

    # entry points of the worker's environment: by name or by their module:attr value
    assert PressStudy(models=["spring"]).models == ["spring"]
    assert PressStudy(models=["hostile_plugin.models:Spring"]).models[0].endswith(":Spring")
    # the worker's setting
    monkeypatch.setenv(registry.ALLOWED_ENV, "hostile_plugin.models:INSTANCE")
    assert PressStudy(models=["hostile_plugin.models:INSTANCE"])
    assert check_model_reference("M2") == "M2"


def test_the_cli_allows_what_its_user_typed(plugin, monkeypatch) -> None:
    from flows.press.flow import PressStudy

    with pytest.raises(ValidationError):
        PressStudy(models=["hostile_plugin.models:INSTANCE"])
    allow_models(["hostile_plugin.models:INSTANCE"])
    assert PressStudy(models=["hostile_plugin.models:INSTANCE"])
    import os

    assert "hostile_plugin.models:INSTANCE" in os.environ[registry.ALLOWED_ENV]  # Dask workers


def test_cli_design_refuses_a_function_with_exit_2(tmp_path, capsys, monkeypatch) -> None:
    from flows.cli import main

    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    assert main(["press", "simulate", "--out", str(tmp_path / "lab.csv")]) == 0
    code = main(["press", "design", "--data", str(tmp_path / "lab.csv"), "--model", "os:abort"])
    assert code == 2
    assert "not a model" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["../../../escape", "a/b", "..", "x\\y", "", " lead", "a" * 101, "tab\there"]
)
def test_experiment_names_cannot_leave_the_store(name, tmp_path, monkeypatch) -> None:
    from flows.drive.flow import DriveSearch
    from flows.inverse.flow import InverseStudy
    from flows.press.flow import PressStudy
    from tracking.mlflow_tracker import Tracker
    from tracking.protocol import validate_experiment_name

    with pytest.raises(InputError):
        validate_experiment_name(name)
    for study in (PressStudy, DriveSearch, InverseStudy):
        with pytest.raises(ValidationError, match="experiment"):
            study(experiment=name)
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    tracker = Tracker()
    with pytest.raises(InputError):
        tracker.experiment_id(name)
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape").exists()


def test_ordinary_experiment_names_pass() -> None:
    from tracking.protocol import validate_experiment_name

    for name in ["press-uncertainty", "lab 2026.12 run_3", "a", "x+y=z@lab"]:
        assert validate_experiment_name(name) == name


def test_cli_detect_refuses_a_function_before_any_flow_runs(tmp_path, capsys, monkeypatch) -> None:
    """`press detect --models os:abort`: exit 2 from the CLI's own check, no MLflow run made."""
    from flows.cli import main

    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    assert main(["press", "simulate", "--out", str(tmp_path / "lab.csv")]) == 0
    code = main(["press", "detect", "--data", str(tmp_path / "lab.csv"), "--models", "M1,os:abort"])
    assert code == 2
    assert "not a model" in capsys.readouterr().err
    assert not (tmp_path / "home" / "mlflow.db").exists()  # refused before the flow started

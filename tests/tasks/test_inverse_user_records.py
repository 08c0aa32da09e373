"""A lab's own system through the tasks and the recorder (issue 30): the outcome and the MLflow
child run name the system's reference, its own name and a hash of its source; editing the
source changes the hash and a long-lived process runs the edited code (the module is
re-imported, as for press plugins); `inverse list` shows a lab system in its own names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crank_hoist"


@pytest.fixture()
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    source = (EXAMPLE / "crank_hoist.py").read_text()
    (tmp_path / "records_hoist.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield tmp_path
    sys.modules.pop("records_hoist", None)


def test_the_outcome_and_the_child_run_name_the_code(lab: Path) -> None:
    from tasks.inverse import tasks
    from tasks.inverse.records import InverseRecorder
    from tracking.memory import InMemoryTracker

    ref = "records_hoist:CrankHoist"
    first = tasks.simulate.fn(ref, {}, None, "bdf2", 1e-2, None, False, None, False)
    assert first.ok, first.error
    plugin = first.to_dict()["plugin"]
    assert plugin["reference"] == ref and plugin["name"] == "crank_hoist"
    assert len(plugin["source"]) == 64  # SHA-256 of the module's source
    assert first.system_info["user_name"] == "crank_hoist"

    tracker = InMemoryTracker()
    recorder = InverseRecorder("lab-systems", tracker)
    with recorder.session({"systems": [ref], "method": "bdf2", "dt": 0.01, "demand": None}) as p:
        recorder.child(first, demand=None, t_end=None)
    (child,) = tracker.children(p)
    assert child.params["system"] == ref and child.tags["greylab.system_name"] == "crank_hoist"
    assert child.tags["greylab.system_source"] == plugin["source"]
    assert child.tags["greylab.system_reference"] == ref
    assert list(child.artifacts["trajectory.parquet"].columns) == [
        "t_s", "phi", "z", "v_phi", "v_z", "tau"]  # fmt: skip

    # the lab edits its system: another hash, and this process runs the edited code
    path = lab / "records_hoist.py"
    path.write_text(path.read_text().replace('"m": 10.0', '"m": 11.0'))
    second = tasks.simulate.fn(ref, {}, None, "bdf2", 1e-2, None, False, None, False)
    assert second.ok and second.parameters["m"] == 11.0
    assert second.plugin is not None and second.plugin["source"] != plugin["source"]


def test_built_in_outcomes_carry_no_plugin_record() -> None:
    from tasks.inverse import tasks

    ok = tasks.simulate.fn("two_mass", {}, None, "bdf2", 2e-2, None, False, None, False)
    assert ok.plugin is None and "plugin" not in ok.to_dict()
    assert "reference" not in ok.system_info


def test_list_names_a_lab_system_in_its_own_words(lab: Path, capsys, monkeypatch) -> None:
    from flows.cli import main
    from models.underactuated import plugins

    monkeypatch.setattr(plugins, "_SESSION_ALLOWED", set())
    monkeypatch.delenv(plugins.ALLOWED_ENV, raising=False)
    assert main(["inverse", "list", "records_hoist:CrankHoist", "--json"]) == 0
    (info,) = json.loads(capsys.readouterr().out)["systems"]
    assert info["name"] == "records_hoist:CrankHoist" and info["user_name"] == "crank_hoist"
    assert info["coordinates"] == ["phi", "z"] and info["controls"] == ["tau"]
    units = {p["name"]: p["unit"] for p in info["parameters"]}
    assert units["b"] == "N m s/rad" and info["has_exact_solution"] is True

    # without names: the built-ins, then the systems this environment allows (a broken one
    # is listed with its error instead of failing the listing)
    monkeypatch.setenv(plugins.ALLOWED_ENV, "records_hoist:CrankHoist,records_missing:Nothing")
    assert main(["inverse", "list", "--json"]) == 0
    systems = {s["name"]: s for s in json.loads(capsys.readouterr().out)["systems"]}
    assert "two_mass" in systems and systems["records_hoist:CrankHoist"]["controls"] == ["tau"]
    assert "cannot import module 'records_missing'" in systems["records_missing:Nothing"]["error"]

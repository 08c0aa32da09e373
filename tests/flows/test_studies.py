"""The study registry (`flows/studies.py`) is the one list of studies (issue 29): the command
line, `greylab compare`, the deployments (the Prefect forms), campaigns and the resource limits
all follow it, and a study missing from any of them fails here. The recipe of
docs/ARCHITECTURE.md ("Adding a study") is followed for a throwaway fourth study in a copy of
the project, which then shows in the CLI, in `compare` and in its deployment's form."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperOption

from flows.cli_settings import Cli, option_name
from flows.studies import STUDIES, StudySpec, compared
from ingestion.rules import Study as DataKind

ROOT = Path(__file__).resolve().parents[2]
NAMES = [s.name for s in STUDIES]


def _group(name: str) -> Any:
    from flows.cli import build_app

    return typer.main.get_command(build_app()).commands[name]  # type: ignore[attr-defined]


def _options(command: Any) -> set[str]:
    found = {o.opts[0] for o in command.params if isinstance(o, TyperOption)}
    for sub in getattr(command, "commands", {}).values():
        found |= _options(sub)
    return found


def test_names_are_unique_and_match_the_recorded_study_tag() -> None:
    assert len(NAMES) == len(set(NAMES)), NAMES
    for spec in STUDIES:
        assert spec.recorder.study == spec.name, "runs are tagged greylab.study = the name"


@pytest.mark.parametrize("spec", STUDIES, ids=NAMES)
def test_every_study_has_its_command_group_with_its_settings_as_options(spec: StudySpec) -> None:
    assert callable(importlib.import_module(spec.cli).register)
    options = _options(_group(spec.name))
    fields = {option_name(n, f) for n, f in spec.settings.model_fields.items()
              if not any(isinstance(m, Cli) and m.hidden for m in f.metadata)}  # fmt: skip
    assert fields <= options, f"{spec.name}: settings without an option: {fields - options}"


@pytest.mark.parametrize("spec", STUDIES, ids=NAMES)
def test_every_study_has_a_deployment_whose_form_is_its_settings(spec: StudySpec) -> None:
    from prefect.utilities.callables import parameter_schema

    from deployments.serve import load_definitions, load_flow

    (entry,) = [d for d in load_definitions() if d["name"] == spec.deployment]
    schema = parameter_schema(load_flow(entry["entrypoint"]).fn).model_dump()
    assert spec.settings.__name__ in schema["definitions"], schema["definitions"].keys()


def test_every_deployment_folder_and_flow_belongs_to_a_study() -> None:
    from deployments.serve import load_definitions

    assert {d["name"] for d in load_definitions()} == {s.deployment for s in STUDIES}
    for layer in ("flows", "tasks"):
        folders = {p.parent.name for p in (ROOT / layer).glob("*/__init__.py")}
        assert folders == set(NAMES), f"{layer}/: folders {folders} vs studies {NAMES}"


def test_compare_lines_up_every_study_with_a_comparison() -> None:
    assert set(compared()) == {s.name for s in STUDIES if s.compare is not None}
    assert {"press", "drive", "inverse"} <= set(compared())
    help_text = " ".join(o.help or "" for o in _group("compare").params)
    for name in compared():
        assert name in help_text


def test_every_limit_belongs_to_a_study_and_every_kind_of_data_starts_one() -> None:
    from flows.campaign_studies import FIXED, SETTINGS
    from models.limits import Limits

    claimed = {v for s in STUDIES for v in s.limits}
    assert claimed == set(Limits.current().values), "limits without a study (or unknown ones)"
    assert set(SETTINGS) == set(FIXED) == set(DataKind), "ingested data that starts no study"
    for spec in STUDIES:
        if spec.campaigns:
            assert set(spec.campaigns.fixed) <= set(spec.settings.model_fields)


# -- the recipe, followed for a throwaway fourth study ---------------------------------------
ECHO_FILES = {
    "flows/echo/__init__.py": "",
    "flows/echo/settings.py": '''
        """Settings of the echo study (a throwaway study of the registry test)."""
        from pydantic import BaseModel, ConfigDict, Field

        class EchoStudy(BaseModel):
            model_config = ConfigDict(extra="forbid", frozen=True)
            text: str = Field("hello", description="What to echo back.", max_length=100)
            times: int = Field(2, ge=1, le=5, description="How often.")
    ''',
    "flows/echo/flow.py": '''
        """The echo flow."""
        from prefect import flow

        from flows.echo.settings import EchoStudy
        from tasks.echo.tasks import echo

        DEFAULT = EchoStudy()

        @flow(name="echo-study")
        def echo_study(settings: EchoStudy = DEFAULT) -> str:
            return echo(settings.text, settings.times)
    ''',
    "flows/echo/cli.py": '''
        """`greylab echo run`."""
        import typer

        from flows.cli_settings import with_settings
        from flows.echo.settings import EchoStudy

        app = typer.Typer(help="Echo a text (a throwaway study).", no_args_is_help=True)

        def register(root: typer.Typer) -> None:
            root.add_typer(app, name="echo")

        @app.command()
        @with_settings(EchoStudy)
        def run(settings: EchoStudy) -> None:
            """Echo the text."""
            from tasks.echo.tasks import echo

            print(echo.fn(settings.text, settings.times))
    ''',
    "tasks/echo/__init__.py": "",
    "tasks/echo/tasks.py": '''
        """The echo task."""
        from prefect import task

        @task
        def echo(text: str, times: int) -> str:
            return " ".join([text] * times)
    ''',
    "tasks/echo/records.py": '''
        """What an echo run records."""
        from tracking.recorder import Recorder

        class EchoRecorder(Recorder):
            study = "echo"
            run_name = "echo"
    ''',
}
ECHO_ROW = """
from flows.echo.settings import EchoStudy  # noqa: E402
from tasks.echo.records import EchoRecorder  # noqa: E402

STUDIES = (*STUDIES, StudySpec(
    "echo", "flows.echo.cli", EchoStudy, "echo-study", EchoRecorder,
    CompareSpec(kind="parent", lead=("text",), headline="times", short=("run_id", "text")),
))
"""
ECHO_DEPLOYMENT = """
  - name: echo-study
    entrypoint: flows/echo/flow.py:echo_study
    description: Echo a text.
    parameters: {}
    work_pool: *process_pool
"""


@pytest.mark.slow
def test_a_fourth_study_from_the_recipe_shows_in_cli_compare_and_forms(tmp_path: Path) -> None:
    """Recipe steps as docs/ARCHITECTURE.md lists them: the folders, one registry row, one
    deployment. Nothing else is edited, and the new study is everywhere a study shows."""
    copy = tmp_path / "greylab"
    keep = ("methods", "models", "schemas", "ingestion", "runtime", "tracking", "products",
            "tasks", "flows", "deployments")  # fmt: skip
    for package in keep:
        shutil.copytree(ROOT / package, copy / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for rel, text in ECHO_FILES.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text(textwrap.dedent(text).lstrip())
    with (copy / "flows" / "studies.py").open("a") as registry:
        registry.write(ECHO_ROW)
    with (copy / "deployments" / "prefect.yaml").open("a") as deployments:
        deployments.write(ECHO_DEPLOYMENT)
    env = {**os.environ, "PYTHONPATH": str(copy), "GREYLAB_HOME": str(tmp_path / "home"),
           "COLUMNS": "120"}  # fmt: skip

    def greylab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-P", "-m", "flows.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip

    listed = greylab("--help")
    assert listed.returncode == 0 and "echo" in listed.stdout, listed.stderr
    ran = greylab("echo", "run", "--text", "hi", "--times", "3")
    assert ran.returncode == 0 and "hi hi hi" in ran.stdout, ran.stderr
    refused = greylab("echo", "run", "--times", "9")  # the settings' range, on the command line
    assert refused.returncode == 2 and "--times" in refused.stderr
    compared_runs = greylab("compare", "--study", "echo")
    assert compared_runs.returncode == 0, compared_runs.stderr
    assert "no tracked echo runs found" in compared_runs.stdout
    form = subprocess.run(
        [sys.executable, "-P", "-c", textwrap.dedent("""
            from prefect.utilities.callables import parameter_schema
            from deployments.serve import load_definitions, load_flow
            (entry,) = [d for d in load_definitions() if d["name"] == "echo-study"]
            schema = parameter_schema(load_flow(entry["entrypoint"]).fn).model_dump()
            print(sorted(schema["definitions"]["EchoStudy"]["properties"]))
        """)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert form.returncode == 0 and "['text', 'times']" in form.stdout, form.stderr


def test_press_runs_with_the_old_and_the_new_p_value_series_line_up(tmp_path, monkeypatch) -> None:
    """The per-test p-values were the series `alpha_min` before 2026-12-05 and are `p_value`
    since (tasks/press/records.py): `greylab compare` shows neither as a column (a series'
    latest value is only its last test's) and gives old and new runs the same columns, with
    `min_alpha`, the smallest p-value, for both."""
    from flows.studies import PRESS_RUNS
    from runtime.settings import load_settings
    from tasks.press.records import OLD_P_VALUES, P_VALUES
    from tracking.compare import runs_table
    from tracking.mlflow_tracker import Tracker

    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    tracker = Tracker(load_settings())
    tracker.ensure_store()
    p_values = [0.4, 0.02, 0.7]
    for series in (OLD_P_VALUES, P_VALUES):
        parent = tracker.start_run("press-uncertainty", "press-study", study="press")
        run = tracker.start_run("press-uncertainty", "model-M3", study="press",
                                parent_run_id=parent)  # fmt: skip
        tracker.log_params(run, {"model": "M3"})
        tracker.log_series(run, series, p_values)
        tracker.log_metrics(run, {"min_alpha": min(p_values), "threshold": 0.05 / 3})
        tracker.end_run(run)
        tracker.end_run(parent)
    frame = runs_table("press", PRESS_RUNS, tracker=tracker)
    assert len(frame) == 2 and frame["min_alpha"].tolist() == [0.02, 0.02]
    assert not {P_VALUES, OLD_P_VALUES} & set(frame.columns), list(frame.columns)
    history = tracker.client.get_metric_history(frame["run_id"].iloc[0], P_VALUES)
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == p_values

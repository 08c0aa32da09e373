"""The papers' own modes one switch away: `paper` in `DriveSearch` and `PressStudy` (the
Prefect form, `--paper/--no-paper`) maps to exactly the paper's settings, refuses a mix with
other sizes, and the run records the settings it used (docs/methods.md §1.7, §2.6)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import ValidationError
from typer.core import TyperOption

from flows.cli import main
from flows.drive.settings import DrivePreset, DriveSearch
from flows.press.settings import PressStudy
from methods.press.uncertainty.tables import Correction, Statistic
from models.drivetrain.gp.presets import emps_settings, paper_settings
from models.drivetrain.gp.settings import GPSettings


def test_drive_paper_runs_the_papers_search_on_the_presets_units() -> None:
    study = DriveSearch(paper=True)
    assert (study.population, study.generations) == (6, 20)  # §4 of the paper
    assert study.search_settings() == paper_settings()  # the preset: tests/models/.../gp_paper
    assert DriveSearch(data="/lab/DATA_EMPS.mat").resolved_preset() is DrivePreset.data
    emps = DriveSearch(paper=True, data="/lab/DATA_EMPS.mat", preset=DrivePreset.emps)
    assert emps.resolved_preset() is DrivePreset.emps
    assert emps.search_settings() == paper_settings(emps_settings())
    nominal = DriveSearch(paper=True, nominals={"J1": 0.02}).search_settings()
    assert nominal == replace(paper_settings(), nominals=(("J1", 0.02),))
    # without the switch: what the flow has always run (defaults at the study's size)
    assert DriveSearch().search_settings() == replace(GPSettings(), population=10, generations=10)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"population": 8}, "population 6: got 8"),
        ({"generations": 30}, "generations 20: got 30"),
        ({"population": 6, "generations": 12}, "generations 20: got 12"),
        ({"test_fraction": 0.3}, "test fraction 0.3"),
    ],
)
def test_drive_paper_refuses_other_sizes(given: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError, match=named) as refused:
        DriveSearch(paper=True, **given)
    assert "drop --paper" in str(refused.value)
    DriveSearch(**given)  # valid without the switch


def test_drive_paper_takes_defaults_by_value_and_round_trips(monkeypatch) -> None:
    # the paper's own values are accepted; greylab's defaults (10, 10) become them
    assert DriveSearch(paper=True, population=6, generations=20) == DriveSearch(paper=True)
    assert DriveSearch(paper=True, population=10, generations=10) == DriveSearch(paper=True)
    # what the form sends back, the recorded params and a campaign file validate the same
    dumped = DriveSearch(paper=True).model_dump(mode="json")
    assert (dumped["paper"], dumped["population"], dumped["generations"]) == (True, 6, 20)
    assert DriveSearch.model_validate_json(json.dumps(dumped), strict=True) == DriveSearch(
        paper=True
    )
    # the machine's limit judges the search that runs: 6 x 20 = 120
    monkeypatch.setenv("GREYLAB_MAX_GP_EVALUATIONS", "100")
    DriveSearch()  # 10 x 10
    with pytest.raises(ValidationError, match="6 x 20 = 120"):
        DriveSearch(paper=True)


def test_press_paper_is_the_papers_statistic_with_bonferroni() -> None:
    study = PressStudy(paper=True)
    assert study.statistic is Statistic.PAPER and study.correction is Correction.BONFERRONI
    assert PressStudy(paper=True, statistic="difference") == study  # the default, by value
    # nothing else: of greylab's defaults only the statistic differs from the paper
    assert study.model_dump(exclude={"paper", "statistic"}) == PressStudy().model_dump(
        exclude={"paper", "statistic"}
    )
    with pytest.raises(ValidationError, match=r"correction holm .*drop --paper"):
        PressStudy(paper=True, correction="holm")
    dumped = study.model_dump(mode="json")
    assert (dumped["paper"], dumped["statistic"]) == (True, "paper")
    assert PressStudy.model_validate_json(json.dumps(dumped), strict=True) == study


@pytest.mark.parametrize("path", [["drive", "identify"], ["press", "detect"]])
def test_the_commands_have_the_switch(path: list[str]) -> None:
    from flows.cli import build_app

    command: Any = typer.main.get_command(build_app())
    for name in path:
        command = command.commands[name]
    options = {o.opts[0]: o for o in command.params if isinstance(o, TyperOption)}
    assert options["--paper"].secondary_opts == ["--no-paper"]
    assert options["--paper"].default is False
    assert "docs/methods.md §" in (options["--paper"].help or "")


def test_the_command_line_names_a_conflict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    code = main(["drive", "identify", "--paper", "--population", "8"])
    err = capsys.readouterr().err
    assert code == 2 and "population 6: got 8" in err and "drop --paper" in err
    code = main(["press", "detect", "--paper", "--correction", "holm"])
    err = capsys.readouterr().err
    assert code == 2 and "correction holm" in err


def test_drive_run_records_the_papers_settings_as_used(
    private_prefect: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.drive import settings as drive_settings
    from flows.drive.flow import run_drive_search
    from models.drivetrain import reference_recording
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker
    from tracking.protocol import param_text

    # the paper's 6 x 20 shrunk to 2 x 1 for speed; every other setting is the paper's
    monkeypatch.setattr(drive_settings, "PAPER_POPULATION", 2)
    monkeypatch.setattr(drive_settings, "PAPER_GENERATIONS", 1)
    data = tmp_path / "ref.csv"
    reference_recording(["one_mass", "viscous", "coulomb"], duration=0.3).to_csv(data, index=False)
    # no rival table: the evidence is not what this test checks (tests/flows/test_drive_fit.py)
    study = DriveSearch(paper=True, data=str(data), preset=DrivePreset.reference,
                        register_model=False, workers=1, rivals=False)  # fmt: skip
    result = run_drive_search(study, runner="thread")
    used = study.search_settings()
    assert (used.population, used.generations, used.selection) == (2, 1, "roulette")
    assert result.paper is True and result.settings == used.to_dict()
    assert result.to_dict()["paper"] is True and result.generations == 1
    assert "the paper's search (2 x 1, roulette)" in result.markdown()
    params = Tracker(load_settings()).client.get_run(result.run_id).data.params
    assert (params["paper"], params["population"], params["generations"]) == ("true", "2", "1")
    flat = used.to_dict()
    identification = flat.pop("identification")
    expected = {f"gp.{k}": param_text(v) for k, v in flat.items()}
    expected |= {f"gp.identification.{k}": param_text(v) for k, v in identification.items()}
    assert {k: v for k, v in params.items() if k.startswith("gp.")} == expected
    assert params["gp.n_elite"] == "0" and params["gp.structure_cache"] == "false"
    assert params["gp.identification.max_nfev"] == "500"
    assert params["gp.identification.prefilter_hz"] == "0.0"


def test_press_run_records_the_papers_statistic(private_prefect: None) -> None:
    from flows.press.flow import press_uncertainty
    from flows.runners import run_flow
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    study = PressStudy(models=["M3"], split="series", n_tests=5, batch_size=5, cache=False,
                       register_model=False, paper=True)  # fmt: skip
    result = run_flow(press_uncertainty, study, runner="thread", workers=1)
    assert (result.paper, result.statistic, result.correction) == (True, "paper", "bonferroni")
    assert {"paper", "statistic", "correction"} <= set(result.to_dict())
    assert "statistic paper, bonferroni correction (the paper's test" in result.markdown()
    client = Tracker(load_settings()).client
    parent = client.get_run(result.parent_run_id)
    (child,) = client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{result.parent_run_id}'"
    )
    for run in (parent, child):
        assert (run.data.params["paper"], run.data.params["statistic"]) == ("true", "paper")


@pytest.mark.slow
def test_a_paper_search_runs_the_papers_six_by_twenty(
    private_prefect: None, tmp_path: Path
) -> None:
    from flows.drive.flow import run_drive_search
    from models.drivetrain import reference_recording

    data = tmp_path / "ref.csv"  # a short record keeps the 120 identifications cheap
    reference_recording(["one_mass", "viscous", "coulomb"], duration=0.3).to_csv(data, index=False)
    study = DriveSearch(
        paper=True, data=str(data), preset=DrivePreset.reference, register_model=False
    )
    result = run_drive_search(study, runner="thread")
    assert result.settings == paper_settings().to_dict() and result.generations == 20
    assert [h["generation"] for h in result.history] == list(range(20))
    assert all(h["evaluated_structures"] <= 6 * (h["generation"] + 1) for h in result.history)

"""`greylab press design` at real sensor counts (issue 15): the shipped 60-probe example with
no measurements, a budget, branch-and-bound with its proof in the output, the figure; bad
candidate sheets exit 2 naming the file and column."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flows.cli import main

GAUGES = Path(__file__).resolve().parents[2] / "examples" / "gauges"


@pytest.fixture(autouse=True)
def _in_gauges(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from models import registry

    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    for name in (registry.ALLOWED_ENV, "PYTHONPATH"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(GAUGES)
    monkeypatch.syspath_prepend(str(GAUGES))


def test_sixty_candidates_at_most_ten_with_a_proven_gap(tmp_path: Path, capsys) -> None:
    figure = tmp_path / "design.png"
    args = ["press", "design", "--model", "gauges:Frame", "--sheet", "gauges.sensors.csv",
            "--max-sensors", "10", "--criterion", "D", "--figure", str(figure), "--json"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    search = out["search"]
    assert search["method"] == "branch-and-bound" and search["proven"] and search["gap"] <= 0.01
    assert search["budget"] == "at most 10 sensors"
    assert out["best"]["n_sensors"] == 10 and len(out["best"]["sensors"].split(",")) == 10
    assert out["best"]["cost"] > 0  # the sheet's cost column is carried along
    assert figure.stat().st_size > 10_000
    assert main(args[:-3]) == 0  # the human summary states the proof
    human = capsys.readouterr().out
    assert "branch-and-bound (at most 10 sensors;" in human and "% proven" in human


def test_a_bad_candidate_sheet_is_exit_2(tmp_path: Path, capsys) -> None:
    sheet = tmp_path / "bad.csv"
    sheet.write_text("sensor,sigma_um,cost\ncolumn_left_01,0.5,cheap\n")
    assert main(["press", "design", "--model", "gauges:Frame", "--sheet", str(sheet)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "column 'cost' at row 0" in err
    sheet.write_text("sensor,sigma_um\nnot_a_probe,0.5\n")
    assert main(["press", "design", "--model", "gauges:Frame", "--sheet", str(sheet)]) == 2
    assert "not sensors of the model" in capsys.readouterr().err


def test_a_missing_figure_folder_is_exit_2_before_the_search(tmp_path: Path, capsys) -> None:
    args = ["press", "design", "--model", "gauges:Frame", "--sheet", "gauges.sensors.csv",
            "--sensors", "4", "--figure", str(tmp_path / "no" / "such" / "d.png")]  # fmt: skip
    assert main(args) == 2
    assert "does not exist" in capsys.readouterr().err


def test_commands_without_plugins_do_not_import_from_their_folder(capsys) -> None:
    import sys

    before = list(sys.path)
    main(["press", "design", "--help"])
    main(["compare", "--study", "press"])
    capsys.readouterr()
    assert sys.path == before and str(GAUGES) not in os.environ.get("PYTHONPATH", "").split(":")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--budget", "-1", "cost budget must be a positive number"),
        ("--budget", "nan", "cost budget must be a positive number"),
        ("--max-sensors", "0", "at most 0 sensors"),
        ("--gap", "-1", "gap_tol (--gap) must lie in (0, 1)"),
        ("--gap", "nan", "gap_tol (--gap) must lie in (0, 1)"),
        ("--time-limit", "-5", "time_limit (--time-limit) must be positive"),
        ("--time-limit", "inf", "time_limit (--time-limit) must be positive"),
        ("--sensors", "1e9", "--sensors: expected a number or 'all'"),
    ],
)
def test_hostile_design_numbers_are_exit_2(option: str, value: str, message: str, capsys) -> None:
    args = ["press", "design", "--model", "gauges:Frame", "--sheet", "gauges.sensors.csv",
            "--sensors", "4", option, value]  # fmt: skip
    if option in ("--max-sensors", "--budget"):
        args[args.index("--sensors") + 1] = "all"
    assert main(args) == 2
    assert message in capsys.readouterr().err

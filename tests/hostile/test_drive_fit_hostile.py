"""`greylab drive fit --structure S` (issue 26, part V) with hostile structures: every bad
element exits 2 with one paragraph naming the element (position and text) or the broken
construction rule, before a server starts or anything is stored; the form's `structure` is
checked the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from flows.drive.settings import DriveFit, DriveSearch
from models.drivetrain import reference_recording

ROOT = Path(__file__).resolve().parents[2]


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # PREFECT_API_URL: the test process's shared Prefect server (tests/conftest.py)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env |= {"GREYLAB_HOME": str(home / "home"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from flows.cli import main; sys.exit(main())",
         *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fit") / "rec.csv"
    reference_recording("1,5,6", duration=0.5).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("structure", "words"),
    [
        ("2,5,frictionn", "--structure: Value error, element 3 'frictionn': not a submodel"),
        ("{2,5,6,12}", "element 4 '12': not a submodel (a paper code 1..11"),
        ("1,2", "exactly one multi-mass type is required, found 2"),
        ("5,6", "exactly one multi-mass type is required, found 0"),
        ("1,9", "one_mass excludes backlash"),
        ("2,5,5", "coulomb appears more than once"),
        ("x" * 100_000, "element 1 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'...: not a"),
        (",".join(["5"] * 30), "30 elements: a structure has at most 11 submodels"),
    ],
)
def test_a_bad_structure_exits_2_naming_the_element(
    structure: str, words: str, recording: Path, tmp_path: Path
) -> None:
    out = _cli(tmp_path, "drive", "fit", "--data", str(recording), "--structure", structure)
    assert out.returncode == 2, out.stderr[-2000:]
    assert words in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr) < 1500  # one paragraph, the input quoted short
    assert not (tmp_path / "home" / "mlflow.db").exists()  # refused before any store


def test_fit_without_a_structure_or_with_paper_is_refused(recording: Path, tmp_path: Path) -> None:
    out = _cli(tmp_path, "drive", "fit", "--data", str(recording))
    assert out.returncode == 2 and "--structure: Value error, name the structure" in out.stderr
    with pytest.raises(ValidationError, match="paper's search: a named structure"):
        DriveSearch(structure=["2", "5"], paper=True)


def test_the_form_checks_the_structure_like_the_command_line() -> None:
    assert DriveSearch(structure=["{2", "5", "6", "7}"]).structure == [
        "two_mass", "coulomb", "viscous", "stribeck"]  # fmt: skip
    assert DriveSearch(structure=["two_mass,coulomb"]).structure == ["two_mass", "coulomb"]
    assert DriveSearch().structure == []  # empty: the search
    with pytest.raises(ValidationError, match="element 2 'nope'"):
        DriveSearch(structure=["2", "nope"])
    fit = DriveFit(structure=["1", "6"], population=3)
    assert fit.study().structure == ["one_mass", "viscous"]
    assert fit.study().population == 3  # hidden on the command line, kept for the form


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["drive", "fit", "--structure", "1,5,6", "--friction-gain", "profile;rm -rf ~"],
         "--friction-gain"),
        (["drive", "identify", "--friction-gain", "profile", "--preset", "reference"],
         "fits a named structure"),
        (["drive", "identify", "--friction-gain", "profile", "--no-final-stage"],
         "this search has none"),
    ],
)  # fmt: skip
def test_a_bad_friction_gain_exits_2_before_any_work(
    recording: Path, tmp_path: Path, argv: list[str], words: str
) -> None:
    """The friction gain is a choice (auto, fixed, profile), and profiling is a fit's or a
    search's final stage (data preset), not any search's: refused with the option named,
    nothing started or tracked."""
    out = _cli(tmp_path, *argv, "--data", str(recording))
    assert out.returncode == 2, out.stderr[-2000:]
    assert words in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "home" / "mlflow.db").exists()

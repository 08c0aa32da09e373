"""`--work-limit` of `greylab drive identify|fit` and the drive form (issue 26, the time limit's
nondeterminism): each identification's budget in state updates (``IdentificationSettings.
work_limit``, ``objective.Clock``), off by default; a fit it stops stops at the same point on
any machine, and the answer, its `timed_out` and its note say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from flows.cli import main
from flows.drive.settings import DriveFit, DrivePreset, DriveSearch
from models.drivetrain import reference_recording
from models.drivetrain.scales import estimate_scales
from models.drivetrain.structure_fit import fit_settings

RIGID = ["one_mass", "coulomb", "viscous"]


def test_the_limit_reaches_every_preset_and_a_named_fit_gets_five_times_it() -> None:
    scales = estimate_scales(reference_recording(RIGID))
    assert DriveSearch().work_limit == 0.0
    assert DriveSearch().search_settings().identification.work_limit == 0.0
    for preset in DrivePreset:
        study = DriveSearch(data="/lab/rec.csv", preset=preset, work_limit=2e8)
        assert study.search_settings(scales=scales).identification.work_limit == 2e8
    fit = DriveFit(data="/lab/rec.csv", structure=RIGID, work_limit=2e8)
    gp = fit_settings(fit.search_settings(scales=scales))
    assert gp.identification.work_limit == 1e9 and gp.identification.time_limit_s == 600.0


@pytest.mark.parametrize("hostile", [-1.0, float("inf"), float("nan"), "1e400", "lots", "<b>"])
def test_anything_but_a_finite_number_of_at_least_zero_is_refused(hostile) -> None:
    with pytest.raises(ValidationError, match="work_limit"):
        DriveSearch(work_limit=hostile)


def test_the_cli_names_a_wrong_value(capsys) -> None:
    assert main(["drive", "identify", "--work-limit", "-5"]) == 2
    assert "work" in capsys.readouterr().err


@pytest.mark.slow
def test_a_search_stopped_by_its_work_limit_answers_alike_and_says_so(
    private_prefect: None, tmp_path: Path
) -> None:
    """The same small search twice with a limit that stops most identifications: the same
    answer and the same stops (the wall clock would put them where the load does), listed in
    `timed_out` and told in the note that names both limits."""
    from flows.drive.flow import run_drive_search

    data = tmp_path / "rec.csv"
    reference_recording(RIGID, duration=1.2, noise=0.01, seed=2).to_csv(data, index=False)
    # resume off: each run computed, none restored from the other's checkpoint
    study = DriveSearch(data=str(data), population=4, generations=1, workers=1, seed=1,
                        register_model=False, rivals=False, work_limit=2e5,
                        resume=False)  # fmt: skip
    first = run_drive_search(study, runner="thread")
    again = run_drive_search(study, runner="thread")
    assert first.timed_out, "a limit of 2e5 state updates stopped no identification"
    assert (again.best_structure, again.parameters, again.timed_out) == (
        first.best_structure, first.parameters, first.timed_out)  # fmt: skip
    notes = (first.evidence or {})["notes"]
    assert any("stopped at the work or time limit (2e+05 state updates or 120 s" in n
               for n in notes)  # fmt: skip

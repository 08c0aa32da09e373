"""`--final-stage/--no-final-stage` (the drive study's `final_stage`): the data preset's final
stage (`GPSettings.final_top`, issue 26) can be switched off from the CLI, the flow and the form;
the other presets have none either way."""

from __future__ import annotations

from dataclasses import replace

from flows.drive.inputs import recording_scales
from flows.drive.settings import DriveFit, DrivePreset, DriveSearch
from models.drivetrain import reference_recording


def test_the_data_preset_keeps_its_final_stage_unless_switched_off() -> None:
    scales = recording_scales(reference_recording())
    on = DriveSearch(preset=DrivePreset.data).search_settings(scales=scales)
    off = DriveSearch(preset=DrivePreset.data, final_stage=False).search_settings(scales=scales)
    assert on.final_top > 0  # the preset's
    assert off.final_top == 0
    assert replace(off, final_top=on.final_top) == on  # nothing else changes


def test_presets_without_a_final_stage_are_unchanged() -> None:
    for preset in (DrivePreset.reference, DrivePreset.emps):
        on = DriveSearch(preset=preset).search_settings()
        assert on == DriveSearch(preset=preset, final_stage=False).search_settings()
        assert on.final_top == 0


def test_the_option_on_the_command_line_and_in_the_form() -> None:
    from typer.testing import CliRunner

    from flows.cli import build_app

    help_text = CliRunner().invoke(build_app(), ["drive", "identify", "--help"]).output
    assert "--no-final-stage" in help_text
    schema = DriveSearch.model_json_schema()["properties"]
    assert schema["final_stage"]["default"] is True
    assert "final_stage" in DriveFit.model_fields  # hidden for a fit: it runs no search
    fit_help = CliRunner().invoke(build_app(), ["drive", "fit", "--help"]).output
    assert "final-stage" not in fit_help

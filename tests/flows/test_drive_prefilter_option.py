"""`--prefilter` of `greylab drive identify|fit` and the drive form (issue 26): the preset's
cut-off, the recording spectrum's, or one in Hz; refused by name when it is not one of them,
when the recording cannot carry it, and with the paper's search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from flows.cli import main
from flows.drive.inputs import prefilter_cutoff, recording_scales
from flows.drive.settings import DrivePreset, DriveSearch
from methods.errors import InputError
from models.drivetrain import reference_recording
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.spectrum import prefilter_choice

DEFAULT_HZ = IdentificationSettings().prefilter_hz


@pytest.fixture(scope="module")
def recording():  # the paper's excitation at 1 kHz, 1 % noise: the spectrum sees its band
    return reference_recording(noise=0.01, seed=3)


@pytest.mark.parametrize(("given", "kept"), [("", ""), ("spectrum", "spectrum"),
                         (" Spectrum ", "spectrum"), ("25", "25"), ("62.5", "62.5"),
                         ("0", "0"), ("1e2", "1e2")])  # fmt: skip
def test_accepted_spellings(given: str, kept: str) -> None:
    assert DriveSearch(prefilter=given).prefilter == kept


@pytest.mark.parametrize("hostile", ["-5", "nan", "inf", "1e999", "25 Hz", "25;rm -rf /",
                                     "__import__('os')", "<script>x</script>", "x" * 500,
                                     "0x10", "1_000"])  # fmt: skip
def test_anything_else_is_refused_by_name(hostile: str) -> None:
    with pytest.raises(ValidationError) as raised:
        DriveSearch(prefilter=hostile)
    text = str(raised.value)
    assert "prefilter" in text and "give 'spectrum'" in text and "a cut-off in Hz" in text
    assert hostile[:40] in text and "x" * 41 not in text.split("[type=")[0]  # quoted short


def test_the_paper_search_has_no_prefilter_to_choose() -> None:
    with pytest.raises(ValidationError, match="without a prefilter"):
        DriveSearch(paper=True, prefilter="40")
    assert DriveSearch(paper=True).search_settings().identification.prefilter_hz == 0.0


def test_the_cut_off_replaces_the_presets_and_none_keeps_it(recording) -> None:
    scales = recording_scales(recording)
    data = DriveSearch(preset=DrivePreset.data)
    assert data.search_settings(scales=scales).identification.prefilter_hz == DEFAULT_HZ
    assert data.search_settings(scales=scales, prefilter_hz=40.0).identification.prefilter_hz == 40
    for preset in (DrivePreset.reference, DrivePreset.emps):
        study = DriveSearch(preset=preset)
        kept, off = study.search_settings(), study.search_settings(prefilter_hz=0.0)
        assert kept.identification.prefilter_hz == DEFAULT_HZ
        assert off.identification.prefilter_hz == 0.0
        assert off.identification == kept.identification.__class__(
            **{**kept.identification.__dict__, "prefilter_hz": 0.0}
        )  # only the cut-off changed


def test_spectrum_is_the_recordings_own_suggestion(recording) -> None:
    scales = recording_scales(recording)
    study = DriveSearch(prefilter="spectrum").prefilter
    assert prefilter_cutoff(DriveSearch().prefilter, recording) is None
    assert prefilter_cutoff(study, recording, scales=scales) == scales.prefilter_hz
    # without scales (reference/emps presets): the same choice from the velocity alone
    own = prefilter_choice(recording["velocity_rad_s"].to_numpy(), 1e-3).cutoff_hz
    assert prefilter_cutoff(study, recording) == own == scales.prefilter_hz
    assert own > DEFAULT_HZ  # 1 % noise on the reference: its band reaches past 25 Hz


def test_a_cut_off_at_or_above_nyquist_is_refused_naming_the_file(recording) -> None:
    assert prefilter_cutoff(DriveSearch(prefilter="499").prefilter, recording) == 499.0
    with pytest.raises(InputError, match=r"lab\.csv: --prefilter 500 Hz .*Nyquist .*500 Hz"):
        prefilter_cutoff(DriveSearch(prefilter="500").prefilter, recording, source="lab.csv")


def test_the_command_refuses_before_any_work(tmp_path: Path, capsys, recording) -> None:
    path = tmp_path / "lab.csv"
    recording.to_csv(path, index=False)
    code = main(["drive", "identify", "--data", str(path), "--prefilter", "5000"])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "Nyquist" in err and "Traceback" not in err
    code = main(["drive", "fit", "--data", str(path), "--structure", "1,6",
                 "--prefilter", "<b>fast</b>"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "prefilter" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_fit_runs_and_logs_with_the_spectrums_cut_off(
    private_prefect: None, tmp_path: Path, capsys
) -> None:
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    path = tmp_path / "rec.csv"
    reference_recording("1,6", duration=0.8, noise=0.01, seed=2).to_csv(path, index=False)
    code = main(["drive", "fit", "--data", str(path), "--structure", "1,6", "--prefilter",
                 "spectrum", "--no-rivals", "--no-register-model", "--workers", "1", "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    suggested = result["scales"]["prefilter_hz"]
    assert result["settings"]["identification"]["prefilter_hz"] == suggested > 0
    params = Tracker(load_settings()).client.get_run(result["run_id"]).data.params
    assert float(params["gp.identification.prefilter_hz"]) == suggested
    assert float(params["scales.prefilter_hz"]) == pytest.approx(suggested, rel=1e-3)
    assert params["prefilter"] == "spectrum"


def test_a_recording_too_short_for_a_spectrum_is_refused_naming_the_file(recording) -> None:
    short = recording.iloc[:40]  # the spectrum needs 64 samples (models.drivetrain.spectrum)
    with pytest.raises(InputError, match=r"lab\.csv: --prefilter spectrum: .*64 samples"):
        prefilter_cutoff("spectrum", short, source="lab.csv")
    assert prefilter_cutoff("", short, source="lab.csv") is None  # the preset's: no spectrum

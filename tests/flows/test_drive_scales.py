"""A recording nobody tuned for (issue 13): with no preset and no nominals the drive search
centres its boxes on the recording's own scales, says so (printed, MLflow `scales.*`, the
result's `scales`), and `--nominal` or a preset still override."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.cli import main
from flows.drive.settings import DrivePreset, DriveSearch
from models.drivetrain import reference_recording
from models.drivetrain.gp.presets import data_settings, emps_settings
from models.drivetrain.scales import estimate_scales

RIGID = ["one_mass", "coulomb", "viscous"]


def test_a_given_recording_uses_its_own_scales_and_nominals_override() -> None:
    scales = estimate_scales(reference_recording(RIGID))
    study = DriveSearch(data="/lab/rec.csv")
    assert study.resolved_preset() is DrivePreset.data
    assert DriveSearch().resolved_preset() is DrivePreset.reference  # the simulated reference
    gp = study.search_settings(scales=scales, position=True)
    base = data_settings(scales, position=True)
    assert (gp.nominals, gp.bounds, gp.f_tanh) == (base.nominals, base.bounds, base.f_tanh)
    assert gp.identification.position_weight == 1.0
    # a typed nominal replaces the value and the box (50..200 % of it)
    typed = DriveSearch(data="/lab/rec.csv", nominals={"J1": 0.5}).search_settings(scales=scales)
    (j1,) = (s for s in typed.specs("one_mass") if s.name == "J1")
    assert (j1.nominal, j1.lower, j1.upper) == (0.5, 0.25, 1.0)
    # a named preset wins over the data
    emps = DriveSearch(data="/lab/rec.csv", preset=DrivePreset.emps).search_settings()
    assert emps.nominals == emps_settings().nominals
    with pytest.raises(ValueError, match="scales"):
        study.search_settings()


@pytest.mark.slow
def test_the_run_logs_prints_and_returns_the_scales(
    private_prefect: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.drive.cli import print_drive_result
    from flows.drive.flow import run_drive_search
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    data = tmp_path / "rec.csv"
    reference_recording(RIGID, duration=1.2).to_csv(data, index=False)
    # no rival table: the scales are checked, not the evidence (tests/flows/test_drive_fit.py)
    study = DriveSearch(data=str(data), population=2, generations=1, workers=1,
                        register_model=False, rivals=False)  # fmt: skip
    result = run_drive_search(study, runner="thread")
    assert result.preset == "data" and result.scales is not None
    assert result.scales["values"]["J"] == pytest.approx(0.01, rel=0.05)  # the true J1
    params = Tracker(load_settings()).client.get_run(result.run_id).data.params
    assert params["preset"] == "data"
    assert float(params["scales.J"]) == pytest.approx(result.scales["values"]["J"], rel=1e-5)
    scales = result.to_dict()["scales"]
    assert scales["r2"] > 0.99
    assert [f for f, _r2 in scales["grid"]] == sorted(
        (f for f, _r2 in scales["grid"]), reverse=True
    )
    assert max(r2 for _f, r2 in scales["grid"]) == scales["r2"]
    # the final stage's choice by the evidence is in the result (the data preset's level)
    chosen = result.to_dict()["selection"]
    assert chosen["alpha"] == result.settings["final_alpha"] > 0
    assert chosen["n_eff"] > 0 and isinstance(chosen["moves"], list)
    # the answer's friction gain: the model's in the settings, the preset's logged before
    gain = result.to_dict()["friction_gain"]
    assert gain["mode"] == "auto" and gain["profiled"] is True
    assert gain["f_tanh"] == result.settings["f_tanh"]
    assert float(params["friction_gain.f_tanh"]) == pytest.approx(gain["f_tanh"], rel=1e-5)
    assert float(params["gp.f_tanh"]) == pytest.approx(gain["preset_f_tanh"], rel=1e-5)
    assert params["friction_gain.estimated"] == str(gain["estimated"])
    capsys.readouterr()
    print_drive_result(result)
    assert "centred on the recording's own scales" in capsys.readouterr().out


def test_a_recording_that_moves_one_way_names_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    data = tmp_path / "oneway.csv"
    reference_recording(RIGID, duration=0.3).to_csv(data, index=False)
    code = main(["drive", "identify", "--data", str(data), "--population", "2",
                 "--generations", "1", "--no-register-model"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "motion in both directions" in err and "--nominal" in err

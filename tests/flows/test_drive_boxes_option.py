"""`--boxes` of `greylab drive identify|fit` and the drive form (issue 26): the data preset's
parameter boxes around the recording's scales, narrow (issue 13) or wide (issue 26)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from flows.cli import main
from flows.drive.inputs import recording_scales
from flows.drive.settings import Boxes, DrivePreset, DriveSearch
from models.drivetrain import reference_recording
from models.drivetrain.scales import INERTIA_SHARE


@pytest.fixture(scope="module")
def scales():
    return recording_scales(reference_recording(noise=0.01, seed=3))


def _box(settings, kind: str, name: str) -> tuple[float, float]:
    return next((s.lower, s.upper) for s in settings.specs(kind) if s.name == name)


def test_wide_boxes_hold_any_split_of_the_inertia_and_narrow_ones_stay_the_default(scales):
    J = scales.values["J"]
    narrow = DriveSearch(preset=DrivePreset.data).search_settings(scales=scales)
    wide = DriveSearch(preset=DrivePreset.data, boxes="wide").search_settings(scales=scales)
    assert DriveSearch().boxes is Boxes.narrow
    assert _box(narrow, "two_mass", "J1") == pytest.approx((J / 4, 1.5 * J))
    assert _box(wide, "two_mass", "J1") == pytest.approx((INERTIA_SHARE[0] * J, 1.5 * J))
    lo, hi = _box(wide, "two_mass", "c1")
    assert hi / lo >= 1000 > _box(narrow, "two_mass", "c1")[1] / _box(narrow, "two_mass", "c1")[0]
    # the boxes are all that changes
    assert (wide.identification, wide.f_tanh) == (narrow.identification, narrow.f_tanh)


@pytest.mark.parametrize("preset", [DrivePreset.reference, DrivePreset.emps])
def test_wide_boxes_belong_to_the_data_preset(preset) -> None:
    with pytest.raises(ValidationError, match="boxes 'wide' are drawn around a recording"):
        DriveSearch(preset=preset, boxes="wide")
    with pytest.raises(ValidationError, match="boxes 'wide' are drawn around a recording"):
        DriveSearch(boxes="wide")  # no recording: the simulated reference's own preset
    assert DriveSearch(preset=preset, boxes="narrow").boxes is Boxes.narrow


@pytest.mark.parametrize("hostile", ["Wide ", "huge", "<b>", "__import__('os')", ""])
def test_anything_else_is_refused(hostile: str) -> None:
    with pytest.raises(ValidationError, match="boxes"):
        DriveSearch(data="x.csv", boxes=hostile)


def test_the_cli_takes_the_option_and_names_a_wrong_one(capsys) -> None:
    assert main(["drive", "identify", "--boxes", "huge", "--data", "x.csv"]) == 2
    err = capsys.readouterr().err
    assert "boxes" in err and "narrow" in err and "wide" in err


def test_a_fit_ending_on_a_narrow_box_s_bound_says_to_try_the_wide_ones() -> None:
    # a two-mass whose 50 Hz mode lies far from the narrow boxes' spring (a mode at 3x the
    # rigid band): the fit ends on the boxes' lower bounds
    import numpy as np

    from models.drivetrain.fit_evidence import narrow_boxes_note
    from models.drivetrain.gp.presets import data_settings
    from models.drivetrain.scales import estimate_scales
    from models.drivetrain.structure_fit import StructureFit

    J1, J2 = 0.01, 0.02
    truth = {"J1": J1, "J2": J2, "c1": (2 * np.pi * 50) ** 2 / (1 / J1 + 1 / J2), "d1": 0.02}
    rec = reference_recording("two_mass,viscous", overrides=truth, duration=1.0, seed=1)
    narrow = data_settings(estimate_scales(rec), position=True)
    assert not _box(narrow, "two_mass", "c1")[0] < truth["c1"]  # the machine lies outside
    evidence = StructureFit("two_mass,viscous", settings=narrow, rivals=False).fit(rec).evidence_
    noted = narrow_boxes_note(evidence)
    assert noted.notes[:-1] == evidence.notes and noted.parameters == evidence.parameters
    assert noted.notes[-1].startswith("J1, c1, d1 ended on a bound of the narrow boxes")
    assert "--boxes wide" in noted.notes[-1] and "--boxes wide" in noted.summary()
    # a box the user drew (a typed nominal) is not the narrow boxes'
    assert narrow_boxes_note(evidence, typed={"c1"}).notes[-1].startswith("J1, d1 ended")
    inside = evidence.__class__(**{**evidence.__dict__, "parameters": evidence.parameters[4:]})
    assert narrow_boxes_note(inside) is inside  # f_v inside its box: nothing to say

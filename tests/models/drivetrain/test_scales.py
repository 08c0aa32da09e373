"""Scales from the data (issue 13): the rigid-body least squares recovers a rigid drive's
parameters exactly, matches the published IDIM-LS values of the EMPS benchmark, finds a
flexible machine's total inertia below its resonance, and the boxes it centres hold the truth
at any machine size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from methods.errors import InputError
from models.drivetrain import reference_recording
from models.drivetrain.gp.presets import EMPS_PUBLISHED, data_settings
from models.drivetrain.scales import Scales, estimate_scales, one_two_five
from models.drivetrain.submodels import Submodel, parameter_specs
from schemas.drive import load_emps

ROOT = Path(__file__).resolve().parents[3]


def test_a_rigid_drive_is_recovered() -> None:
    """Truth: J1 0.01, M_C 0.2, f_v 0.01 (the submodels' nominals), M_G 0.05; the simulated
    Coulomb law is a steep tanh, equal to sign(v) away from zero speed."""
    rec = reference_recording(["one_mass", "coulomb", "viscous", "gravity"],
                              overrides={"M_G": 0.05})  # fmt: skip
    s = estimate_scales(rec)
    assert s.r2 > 0.999
    assert s.values["J"] == pytest.approx(0.01, rel=1e-2)
    assert s.values["f_v"] == pytest.approx(0.01, rel=1e-2)
    assert s.values["M_C"] == pytest.approx(0.2, rel=1e-2)
    assert abs(s.values["offset"]) == pytest.approx(0.05, rel=1e-2)


def test_emps_matches_the_published_idim_ls_values() -> None:
    """The EMPS data set's description gives M 95.1089 kg, Fv 203.5034 N s/m, Fc 20.3935 N and
    an offset of -3.1648 N (M_G = 3.1648): within 3 % at 100 Hz."""
    s = estimate_scales(load_emps(ROOT / "data" / "emps" / "DATA_EMPS.mat", decimate=10))
    assert s.r2 > 0.99
    assert s.values["J"] == pytest.approx(EMPS_PUBLISHED["J1"], rel=0.03)
    assert s.values["f_v"] == pytest.approx(EMPS_PUBLISHED["f_v"], rel=0.03)
    assert s.values["M_C"] == pytest.approx(EMPS_PUBLISHED["M_C"], rel=0.03)
    assert -s.values["offset"] == pytest.approx(EMPS_PUBLISHED["M_G"], rel=0.03)


def test_a_flexible_drive_is_fitted_below_its_resonance() -> None:
    """The paper's two-mass reference (J1 + J2 = 0.03, resonance 13.8 Hz) is not rigid: the
    unfiltered fit explains 41 % of the input and gives a third of the inertia; the band
    search fits below the resonance and gets the total inertia and the friction."""
    rec = reference_recording()
    raw = estimate_scales(rec, cutoffs=[0])
    assert raw.r2 < 0.5 and raw.values["J"] < 0.02
    s = estimate_scales(rec)
    assert s.r2 > 0.99
    assert 0 < s.cutoff_hz <= s.rigid_hz < 13.8
    assert s.values["J"] == pytest.approx(0.03, rel=0.05)
    assert s.values["M_C"] == pytest.approx(0.2, rel=0.1)  # Stribeck (0.15) decays by 3 rad/s


def boxes(scales: Scales) -> dict[str, tuple[float, float, float]]:
    """(lower, nominal, upper) of every parameter as the search sees it (the data preset)."""
    gp = data_settings(scales, position=False)
    return {s.name: (s.lower, s.nominal, s.upper) for k in Submodel for s in gp.specs(k)}


TRUTH = {"J1": 0.01, "J2": 0.02, "c1": 50.0, "d1": 0.05, "M_C": 0.2, "f_v": 0.01,
         "M_S": 0.15, "dq0": 1.0}  # fmt: skip


@pytest.mark.parametrize("noise_percent", [0.0, 1.0])
def test_the_nominal_boxes_hold_the_reference_truth(noise_percent: float) -> None:
    """Every true parameter of the reference lies strictly inside the box the scales give,
    and the tanh gain is the paper's 10 s/rad (100 / v_max, v_max 10.2 rad/s, on the 1-2-5 series)."""
    clean = reference_recording()
    sigma = noise_percent / 100 * float(np.ptp(clean["velocity_rad_s"]))
    scales = estimate_scales(reference_recording(noise=sigma, seed=3))
    box = boxes(scales)
    for name, value in TRUTH.items():
        lo, nominal, hi = box[name]
        assert lo < value < hi, (name, value, box[name])
        assert lo <= nominal <= hi
    assert scales.nominals()[2] == 10.0  # 100 / v_max on the 1-2-5 series: the paper's gain


def test_scales_follow_the_machine_size() -> None:
    """A machine k times heavier and stronger at the same speeds (every inertia, stiffness,
    damping and torque times k) has k times the scales: the boxes scale, the truth stays in."""
    k = 1000.0
    big = {name: value * k for name, value in TRUTH.items() if name != "dq0"}
    small = estimate_scales(reference_recording())
    large = estimate_scales(reference_recording(overrides=big, inertia=0.03 * k))
    for name in ("J", "f_v", "M_C"):
        assert large.values[name] == pytest.approx(k * small.values[name], rel=1e-6)
    box, small_box = boxes(large), boxes(small)
    for name, value in big.items():
        assert box[name][0] < value < box[name][2], name
        assert box[name][1] == pytest.approx(k * small_box[name][1], rel=1e-6)
    assert large.nominals()[2] == pytest.approx(small.nominals()[2], rel=1e-6)


def test_emps_boxes_hold_the_published_values() -> None:
    s = estimate_scales(load_emps(ROOT / "data" / "emps" / "DATA_EMPS.mat", decimate=10))
    box = boxes(s)
    for name, value in EMPS_PUBLISHED.items():
        assert box[name][0] < value < box[name][2], name


@pytest.mark.parametrize(
    ("value", "rounded"),
    [(9.79, 10.0), (787.4, 1000.0), (0.0141, 0.01), (0.0142, 0.02), (0.0159, 0.02),
     (3.2, 5.0), (3.1, 2.0), (7.0, 5.0), (7.1, 10.0), (1.0, 1.0), (2e-7, 2e-7)],
)  # fmt: skip
def test_the_friction_gain_is_an_order_of_magnitude(value: float, rounded: float) -> None:
    """Nearest in log scale: the boundaries are the geometric means sqrt(2), sqrt(10), sqrt(50)."""
    assert one_two_five(value) == pytest.approx(rounded, rel=1e-12)


def test_a_fit_without_inertia_names_the_way_out() -> None:
    """A recording with the velocity's sign flipped (a wrongly wired encoder) gives a negative
    inertia: the scales refuse it and say what to give instead."""
    rec = reference_recording(["one_mass", "viscous"])
    rec = rec.assign(velocity_rad_s=-rec["velocity_rad_s"])
    with pytest.raises(InputError, match="--nominal"):
        estimate_scales(rec).nominals()


def test_a_recording_without_motion_both_ways_is_refused() -> None:
    rec = reference_recording(["one_mass", "viscous"])
    with pytest.raises(InputError, match="motion in both directions"):
        estimate_scales(rec[rec["velocity_rad_s"] >= 0])


def test_an_unfiltered_fit_gives_boxes_every_structure_accepts() -> None:
    """``cutoffs=[0]`` (the unfiltered fit) has no lowest cut-off to draw the softest spring
    from: the springs' lower bounds stay above zero, as the kit requires, instead of a
    ``bounds of c1`` refusal the user never wrote (session 29's review)."""
    rec = reference_recording(["one_mass", "coulomb", "viscous", "gravity"],
                              overrides={"M_G": 0.05})  # fmt: skip
    s = estimate_scales(rec, cutoffs=[0])
    assert s.grid[0][0] == 0.0 and s.r2 > 0.99
    nominals, bounds, _gain = s.nominals(wide=True)
    for kind in Submodel:  # parameter_specs refuses a box at or below zero for these
        for spec in parameter_specs(kind, nominals, bounds):
            assert spec.lower < spec.nominal < spec.upper or spec.name == "M_G", spec
            assert spec.name == "M_G" or spec.lower > 0, spec


@pytest.mark.parametrize("cutoffs", [[], [-5.0], [float("nan")], [float("inf")], ["25"]])
def test_cutoffs_that_are_no_frequency_are_refused_by_name(cutoffs: list) -> None:
    """The Python API's ``cutoffs``: an empty list raised a bare ``ValueError`` from ``max``,
    NaN gave NaN boxes, a negative one was taken as unfiltered."""
    with pytest.raises(InputError, match="cutoffs must be Hz >= 0"):
        estimate_scales(reference_recording(["one_mass", "viscous"]), cutoffs=cutoffs)

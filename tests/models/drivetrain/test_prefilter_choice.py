"""The data preset's prefilter cut-off from the recording's spectrum (issue 26,
``models.drivetrain.spectrum``): above a known resonance of a machine simulated apart from the
kit, the default for a record without one, an explicit value wins, the selection's sample
count follows, EMPS keeps its 25 Hz, hostile inputs are refused by name."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import StateSpace, butter, cont2discrete, dlsim, sosfilt

from methods.errors import InputError
from models.drivetrain import reference_recording
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.selection import prefilter_count
from models.drivetrain.scales import estimate_scales
from models.drivetrain.spectrum import (
    DEFAULT_PREFILTER_HZ,
    MARGIN,
    MIN_SAMPLES,
    prefilter_choice,
    visible_top,
)
from schemas.drive import load_emps

ROOT = Path(__file__).resolve().parents[3]
DT = 1e-3


def two_mass_velocity(resonance_hz: float, seed: int, rigid: bool = False) -> np.ndarray:
    """The motor velocity of a linear two-mass (J1 0.01, J2 0.02, damping ratio 0.05, viscous
    friction at the motor; ``rigid``: the shaft 100x stiffer) under a random torque whose
    spectrum falls above 10 Hz (white noise through a 2nd-order low-pass: the resonance, not
    the excitation, decides what stands above the noise), 3 s at 1 kHz, exact zero-order-hold
    discretisation (scipy, not greylab's kit), noise 0.5 % of the velocity's range."""
    j1, j2, zeta, f_v = 0.01, 0.02, 0.05, 0.05
    j_eff = j1 * j2 / (j1 + j2)
    c = (2 * math.pi * resonance_hz) ** 2 * j_eff * (1e4 if rigid else 1.0)
    d = 2 * zeta * math.sqrt(c * j_eff)
    a = np.array([[0, 0, 1, 0], [0, 0, 0, 1],
                  [-c / j1, c / j1, -(d + f_v) / j1, d / j1],
                  [c / j2, -c / j2, d / j2, -d / j2]])  # fmt: skip
    b = np.array([[0], [0], [1 / j1], [0]])
    sys_d = cont2discrete((a, b, np.array([[0, 0, 1, 0]]), np.zeros((1, 1))), DT)
    rng = np.random.default_rng(seed)
    u = sosfilt(butter(2, 10.0, fs=1 / DT, output="sos"), rng.normal(0.0, 1.0, 3001))
    _, y, _ = dlsim(StateSpace(*sys_d[:4], dt=DT), u)
    v = y[:, 0]
    return v + rng.normal(0.0, 0.005 * float(np.ptp(v)), v.size)


@pytest.mark.parametrize(("resonance_hz", "seed"), [(40.0, 31), (60.0, 32), (70.0, 33)])
def test_the_cutoff_lies_above_a_known_resonance(resonance_hz: float, seed: int) -> None:
    """The resonance lies inside the visible band (up to one Welch bin, 1.95 Hz, below it) and
    the cut-off at least 1.9x above it (``MARGIN`` 2, rounding to 2 digits): the forward-
    backward filter passes >= 99.5 % of the amplitude there (1 / (1 + 1.9^-8)). The same
    machine with a stiff shaft (resonance 100x higher, out of the excited band) under the same
    torque gets a lower cut-off: the resonance, not the excitation alone, sets it."""
    choice = prefilter_choice(two_mass_velocity(resonance_hz, seed), DT)
    assert choice.visible_hz >= resonance_hz - 2.0, choice
    assert 1.9 * resonance_hz <= choice.cutoff_hz <= 0.25 / DT, choice
    assert 1 / (1 + (resonance_hz / choice.cutoff_hz) ** 8) > 0.995
    rigid = prefilter_choice(two_mass_velocity(resonance_hz, seed, rigid=True), DT)
    assert rigid.cutoff_hz < choice.cutoff_hz, (rigid, choice)


def test_a_rigid_machine_with_a_slow_excitation_keeps_the_default() -> None:
    """A one-mass driven by torque below 5 Hz: the output stands above its noise only there,
    so the cut-off is the default (not 2 x 5 Hz: never below the validated 25 Hz); velocity
    noise alone shows nothing above the floor and gets the default too."""
    t = np.arange(3001) * DT
    rng = np.random.default_rng(5)
    u = sum(np.sin(2 * math.pi * f * t + rng.uniform(0, 6)) for f in (0.5, 1.3, 2.9, 4.7))
    v = np.cumsum(u - u.mean()) * DT / 0.03 - 0.3 * t  # J 0.03, no friction
    v += rng.normal(0.0, 0.005 * np.ptp(v), v.size)
    choice = prefilter_choice(v, DT)
    assert choice.cutoff_hz == DEFAULT_PREFILTER_HZ and choice.visible_hz < 12.5, choice
    noise = prefilter_choice(rng.normal(0.0, 1.0, 3001), DT)
    assert noise.cutoff_hz == DEFAULT_PREFILTER_HZ and noise.visible_hz == 0.0, noise
    assert "default" in noise.why


def test_the_data_preset_runs_with_a_named_cut_off_and_25_hz_by_default() -> None:
    """The reference with 1 % noise: the scales choose (and say why), the data preset runs
    with 25 Hz unless a ``prefilter_hz`` is named (the spectrum's, 40 Hz or 0: off), and the
    selection's effective sample count follows the cut-off the search runs with (about
    ``N 2 f_c / f_s``)."""
    clean = reference_recording()
    rec = reference_recording(noise=0.01 * float(np.ptp(clean["velocity_rad_s"])), seed=3)
    scales = estimate_scales(rec)
    assert DEFAULT_PREFILTER_HZ < scales.prefilter_hz <= 250.0
    assert scales.prefilter_hz == pytest.approx(MARGIN * scales.visible_hz, rel=0.05)
    assert f"spectrum's prefilter {scales.prefilter_hz:.4g} Hz" in scales.summary()
    assert scales.to_dict()["prefilter_hz"] == scales.prefilter_hz
    assert data_settings(scales, position=False).identification.prefilter_hz == 25.0
    gp = data_settings(scales, position=False, prefilter_hz=scales.prefilter_hz)
    assert gp.identification.prefilter_hz == scales.prefilter_hz
    for named in (40.0, 0.0):
        assert (
            data_settings(scales, position=False, prefilter_hz=named).identification.prefilter_hz
            == named
        )
    n = len(rec)
    for cutoff in (DEFAULT_PREFILTER_HZ, gp.identification.prefilter_hz):
        assert prefilter_count(n, cutoff, DT) == pytest.approx(n * 2 * cutoff * DT, rel=0.05)
    assert prefilter_count(n, 0.0, DT) == n


def test_emps_keeps_its_25_hz() -> None:
    """EMPS as the CLI reads it (decimated to 100 Hz): a quarter of its sampling rate is
    25.0004 Hz, rounded to the 25 Hz it was validated with: its search is unchanged."""
    rec = load_emps(ROOT / "data" / "emps" / "DATA_EMPS.mat", decimate=10)
    scales = estimate_scales(rec)
    assert scales.prefilter_hz == 25.0
    assert data_settings(scales, position=True).identification.prefilter_hz == 25.0


@pytest.mark.parametrize(
    ("values", "dt", "match"),
    [
        (np.r_[np.ones(100), np.nan], DT, "non-finite"),
        (np.r_[np.zeros(100), np.inf], DT, "non-finite"),
        (np.full(200, 0.7), DT, "constant"),
        (np.arange(MIN_SAMPLES - 1.0), DT, f"at least {MIN_SAMPLES} samples"),
        (np.arange(200.0), 0.0, "sample time"),
        (np.arange(200.0), math.nan, "sample time"),
    ],
)
def test_hostile_inputs_are_refused_by_name(values, dt, match) -> None:
    with pytest.raises(InputError, match=match):
        visible_top(values, dt)
    with pytest.raises(InputError, match=match):
        prefilter_choice(values, dt)


def test_a_recording_too_short_for_a_spectrum_is_refused_by_the_scales() -> None:
    rec = reference_recording().iloc[: MIN_SAMPLES - 1]
    with pytest.raises(InputError, match=f"at least {MIN_SAMPLES} samples"):
        estimate_scales(rec)

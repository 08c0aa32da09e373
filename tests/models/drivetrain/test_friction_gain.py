"""The friction tanh gain chosen by the recording (``models.drivetrain.friction_gain``, issue
26 part 3): recovery of a known gain from the kit's own noise-free recording."""

from __future__ import annotations

import math

import pytest

from methods.errors import InputError
from models.drivetrain import reference_recording
from models.drivetrain.friction_gain import (
    GAIN_RTOL,
    NARROW_STEPS,
    _narrowed,
    profile_friction_gain,
    warm_profile,
)
from models.drivetrain.gp.evaluate import IndividualSpec
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.scales import estimate_scales
from models.drivetrain.structure_fit import StructureFit


def _profile(structure, f_tanh):
    rec = reference_recording(structure, f_tanh=f_tanh)
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    spec = IndividualSpec(structure, tuple(sorted(gp.nominals)), refine_above=0.0)
    y = rec["velocity_rad_s"].to_numpy()
    return profile_friction_gain(spec, as_arrays(rec), gp), gp, float(y @ y)


def test_a_gain_unlike_the_default_is_recovered() -> None:
    """A Coulomb machine smoothed with 3.3 s/rad where the scales' default is 5 (100 / v_max
    rounded): the profile picks a gain within 10 % of 3.3 (grid 0.2..5x the default, half a
    grid step either side of the best, parabola in log gain; measured 3.2, 3 % off) and fits
    to RSS <= 1e-6 of sum y^2 (measured 5e-9; the fixed default gain: 7.9e-7)."""
    structure = ("one_mass", "coulomb", "viscous")
    prof, gp, ss = _profile(structure, 3.3)
    assert gp.f_tanh == 5.0  # the default the profile must move away from
    assert abs(prof.f_tanh / 3.3 - 1.0) < 0.10, prof.profile
    assert prof.evaluation.rss <= 1e-6 * ss
    assert len(prof.profile) <= 9 and prof.f_tanh in dict(prof.profile)


def test_a_structure_without_smoothed_friction_is_identified_once() -> None:
    """Invariant: viscous friction has no tanh, so the gain changes nothing: one
    identification at the default gain."""
    prof, gp, _ss = _profile(("one_mass", "viscous"), 3.3)
    assert prof.profile == ((gp.f_tanh, prof.evaluation.rss),)


def test_drive_fit_can_choose_the_gain() -> None:
    """``StructureFit(..., friction_gain="profile")`` (what ``drive fit`` would call): the same
    recovery through the named-structure fit, its model and JSON carrying the chosen gain;
    ``fixed`` keeps the settings' gain and reports no profile; a wrong option is refused."""
    structure = ("one_mass", "coulomb", "viscous")
    rec = reference_recording(structure, f_tanh=3.3)
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    fit = StructureFit(structure, settings=gp, n_starts=1, rivals=False,
                       friction_gain="profile").fit(rec)  # fmt: skip
    assert abs(fit.gain_profile_.f_tanh / 3.3 - 1.0) < 0.10  # as above: measured 3 %
    assert fit.to_dict()["settings"]["f_tanh"] == fit.gain_profile_.f_tanh
    assert fit.to_dict()["friction_gain"]["f_tanh"] == fit.gain_profile_.f_tanh
    fixed = StructureFit(structure, settings=gp, n_starts=1, rivals=False).fit(rec)
    assert fixed.gain_profile_ is None and fixed.to_dict()["settings"]["f_tanh"] == 5.0
    with pytest.raises(InputError, match="friction_gain"):
        StructureFit(structure, settings=gp, friction_gain="fit")


def test_the_warm_profile_narrows_to_a_gain_between_its_grid_points() -> None:
    """The final stage's warm profile (``warm_profile``) on the Coulomb machine above (3.3 s/rad
    where the scales' default is 5: 0.66x the centre, between the grid's 0.5x and 1x and next
    to the half step 0.63x): its narrowing (parabola vertices, else golden sections, until
    both neighbours of the best lie within ``GAIN_RTOL``) ends within 2.5 % of 3.3 (measured
    3.298), where the noise-free truth fits to RSS <= 1e-6 of sum y^2. Before the narrowing
    (one vertex) it ended at 3.459, 4.8 % off, RSS 4.7e-3. At most the first fit, 4 grid and
    2 half steps and ``NARROW_STEPS`` refits."""
    structure = ("one_mass", "coulomb", "viscous")
    rec = reference_recording(structure, f_tanh=3.3)
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    assert gp.f_tanh == 5.0  # the centre the profile must move away from
    spec = IndividualSpec(structure, tuple(sorted(gp.nominals)), refine_above=0.0)
    prof = warm_profile(spec, as_arrays(rec), gp)
    y = rec["velocity_rad_s"].to_numpy()
    assert abs(prof.f_tanh / 3.3 - 1.0) < 0.025, prof.profile
    assert prof.evaluation.rss <= 1e-6 * float(y @ y), prof.profile
    assert len(prof.profile) <= 1 + 4 + 2 + NARROW_STEPS


def _narrow_until_done(rss, gains) -> tuple[float, int]:
    """The warm profile's narrowing on a known profile ``rss(gain)`` from ``gains``: the best
    gain and the refits, each checked to lie strictly inside the best's bracket, untried."""
    tried = {g: rss(g) for g in gains}
    for step in range(NARROW_STEPS):
        best = min(tried, key=tried.__getitem__)
        nxt = _narrowed(sorted(tried.items()), best)
        if nxt is None:
            return best, step
        below = [g for g in tried if g < best]
        above = [g for g in tried if g > best]
        assert max(below) < nxt < min(above) and nxt not in tried
        tried[nxt] = rss(nxt)
    return min(tried, key=tried.__getitem__), NARROW_STEPS


def test_the_narrowing_finds_a_sharp_minimum_and_stops_where_it_cannot_help() -> None:
    """``_narrowed`` on known profiles (no fits): a sharp minimum at 40.9 seen from the warm
    grid about 100 (+-10 % in the gain is +50 % in RSS, seed-0 machine #9's shape) ends
    within ``GAIN_RTOL`` of it; a level profile (the friction vanished), a best whose fits
    all failed (RSS inf), a best at the grid's end and fewer than three gains get no refit."""
    grid = (20.0, 31.55, 50.0, 79.24, 100.0, 200.0)
    best, steps = _narrow_until_done(lambda g: 1.0 + 50.0 * math.log(g / 40.9) ** 2, grid)
    assert abs(best / 40.9 - 1.0) <= GAIN_RTOL and steps <= NARROW_STEPS
    level = [(g, 0.5) for g in grid]
    assert _narrowed(level, 50.0) is None
    assert _narrowed([(g, math.inf) for g in grid], 50.0) is None
    assert _narrowed([(g, g) for g in grid], 20.0) is None  # the best at the end
    assert _narrowed([(40.0, 1.0), (50.0, 2.0)], 40.0) is None

"""The search once more at a wider prefilter (models.drivetrain.gp.widening): when its answer
leaves a mode above the cut-off in the residual, and only then."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from models.drivetrain import reference_recording
from models.drivetrain.gp import widening
from models.drivetrain.gp.evaluate import IndividualSpec, identify
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.search import StructureSearch
from models.drivetrain.scales import estimate_scales

J1, J2 = 0.01, 0.02
MODE_HZ = 50.0  # above the data preset's 25 Hz prefilter


@pytest.fixture(scope="module")
def two_masses():
    """A two-mass machine whose mode (50 Hz) the 25 Hz prefilter hides, 0.5 % noise."""
    c1 = (2 * np.pi * MODE_HZ) ** 2 / (1 / J1 + 1 / J2)
    truth = {"J1": J1, "J2": J2, "c1": c1, "d1": 0.02, "f_v": 0.01}
    clean = reference_recording("two_mass,viscous", overrides=truth, seed=1)
    sigma = 0.005 * float(np.ptp(clean["velocity_rad_s"]))
    return reference_recording("two_mass,viscous", overrides=truth, noise=sigma, seed=1)


def _answer(rec, settings, structure=("two_mass", "viscous")):
    """``structure`` identified on ``rec`` with ``settings`` as a fitted search's answer. The
    two-mass machine's own structure fitted through the 25 Hz prefilter misplaces the mode (at
    38.5 Hz): the residual keeps a peak above the cut-off."""
    start = tuple(sorted((sp.name, sp.nominal) for k in structure for sp in settings.specs(k)))
    ev = identify(IndividualSpec(structure, start), as_arrays(rec), settings)
    return SimpleNamespace(settings=settings, best_evaluation_=ev, n_evaluations_=1)


def test_a_mode_above_the_prefilter_widens_it_to_show_the_mode(two_masses) -> None:
    preset = data_settings(estimate_scales(two_masses), position=True, wide=True)
    assert preset.widen_prefilter and preset.identification.prefilter_hz == 25.0
    search = _answer(two_masses, preset)
    wider, record = widening.wider(search, preset, as_arrays(two_masses))
    peak = record["periodic"]["frequency_hz"]
    assert 25.0 < peak < MODE_HZ + 5.0 and record["periodic"]["p_value"] < 1e-6
    assert wider.identification.prefilter_hz == record["to_prefilter_hz"] >= 2 * peak
    assert not wider.widen_prefilter  # once
    assert wider.f_tanh == preset.f_tanh and wider.nominals == preset.nominals
    assert wider.bounds == widening.with_mode_at(preset, peak).bounds  # nothing else
    assert record["to_stiffness_max"] >= record["from_stiffness_max"]
    assert record["first_structure"] == ["two_mass", "viscous"]
    assert record["from_prefilter_hz"] == 25.0


@pytest.mark.parametrize("wide", [True, False])
def test_the_wider_search_s_springs_hold_a_mode_at_the_peak(two_masses, wide) -> None:
    # the scales drew the spring box around the resonance their spectrum saw; a mode at the
    # peak, for any split of the total inertia, lies inside the widened one
    preset = data_settings(estimate_scales(two_masses), position=True, wide=wide)
    peak = 4 * MODE_HZ
    wider = widening.with_mode_at(preset, peak)
    total = sum(s.nominal for s in preset.specs("two_mass") if s.name in ("J1", "J2"))
    for ladder in ("two_mass", "three_mass", "four_mass"):
        old = {s.name: s for s in preset.specs(ladder)}
        for s in wider.specs(ladder):
            assert s.nominal == old[s.name].nominal
            assert s.lower <= old[s.name].lower and s.upper >= old[s.name].upper  # a union
            if s.name[0] not in "cd":
                assert (s.lower, s.upper) == (old[s.name].lower, old[s.name].upper)
    c1 = next(s for s in wider.specs("two_mass") if s.name == "c1")
    d1 = next(s for s in wider.specs("two_mass") if s.name == "d1")
    for share in (0.05, 0.25, 0.5, 0.75, 0.95):
        c = (2 * np.pi * peak) ** 2 * share * (1 - share) * total
        assert c1.lower <= c <= c1.upper
        zeta = 0.05  # a lightly damped mode: d = 2 zeta sqrt(c J_reduced)
        assert d1.lower <= 2 * zeta * np.sqrt(c * share * (1 - share) * total) <= d1.upper
    assert c1.upper > next(s.upper for s in preset.specs("two_mass") if s.name == "c1")
    assert widening.with_mode_at(wider, peak).bounds == wider.bounds  # a box that holds it
    # a spring the user typed (a nominal without bounds) stays every ladder's nominal
    typed = replace(preset, nominals=(*preset.nominals, ("c1", 5.0)),
                    bounds=tuple(b for b in preset.bounds if b[0] != "c1"))  # fmt: skip
    for ladder in ("two_mass", "three_mass", "four_mass"):
        c1 = next(s for s in widening.with_mode_at(typed, peak).specs(ladder) if s.name == "c1")
        assert c1.nominal == 5.0 and c1.upper > 10.0, ladder


def test_no_widening_when_not_asked_or_nothing_periodic_lies_above(two_masses) -> None:
    data = as_arrays(two_masses)
    named = data_settings(estimate_scales(two_masses), position=True, prefilter_hz=25.0)
    assert not named.widen_prefilter  # a cut-off the user named is kept
    assert widening.wider(_answer(two_masses, named), named, data) is None
    low = replace(named, widen_prefilter=True)  # the one-mass answer's peak (7 Hz) lies inside
    assert widening.wider(_answer(two_masses, low, ("one_mass", "viscous")), low, data) is None
    truth = {"J1": 0.02, "f_v": 0.01}  # a white residual: the answer is the machine
    rec = reference_recording("one_mass,viscous", overrides=truth, noise=0.01, seed=3)
    preset = data_settings(estimate_scales(rec), position=True)
    answer = _answer(rec, preset, ("one_mass", "viscous"))
    assert widening.wider(answer, preset, as_arrays(rec)) is None


def test_the_search_runs_again_at_the_wider_cut_off_and_records_the_first(
    two_masses, tmp_path
) -> None:
    # a search over two-mass structures only: its first answer misplaces the mode, the
    # second runs at the cut-off that shows it, from its own checkpoint directory
    preset = data_settings(estimate_scales(two_masses), position=True, wide=True,
                           allowed=("two_mass", "viscous"), final_top=0, polish_rounds=0)  # fmt: skip
    s = StructureSearch(2, 1, 0, settings=preset, checkpoint_dir=tmp_path).fit(two_masses)
    w = s.widened_
    assert w is not None and w["from_prefilter_hz"] == 25.0 and w["to_prefilter_hz"] > 25.0
    # the answer is the second search's where its residual passes Fisher's test, else the first
    assert w["kept"] == (w["second_periodic"] is None or w["second_periodic"]["passed"])
    answer = "second" if w["kept"] else "first"
    assert s.best_structure_ == w[f"{answer}_structure"] and s.best_rss_ == w[f"{answer}_rss"]
    cut = w["to_prefilter_hz"] if w["kept"] else 25.0
    assert s.settings.identification.prefilter_hz == cut and s.to_dict()["widened"] == w
    peak = w["periodic"]["frequency_hz"]  # its spring boxes follow the peak: named by both
    assert (tmp_path / f"widened-{w['to_prefilter_hz']:g}-{peak:.6g}").is_dir()
    assert s.checkpoint_dir == tmp_path
    assert s.n_evaluations_ == w["first_evaluations"] + w["second_evaluations"]
    w = dict(w)
    again = s.fit(two_masses)  # resumed from both checkpoints: the same answer
    counts = ("first_evaluations", "second_evaluations")  # none evaluated on the resume
    same = {k: v for k, v in again.widened_.items() if k not in counts}
    assert same == {k: v for k, v in w.items() if k not in counts}
    assert again.best_structure_ == s.best_structure_ and again.resumed_from_ == 1
    once = StructureSearch(2, 1, 0, settings=replace(preset, widen_prefilter=False))
    assert once.fit(two_masses).widened_ is None
    assert once.settings.identification.prefilter_hz == 25.0


def test_a_second_search_that_fails_leaves_the_first_answer(two_masses, monkeypatch) -> None:
    preset = data_settings(estimate_scales(two_masses), position=True, wide=True,
                           allowed=("two_mass", "viscous"), final_top=0, polish_rounds=0)  # fmt: skip
    calls = []
    search_once = StructureSearch._search

    def failing_second(self, recording, data):
        calls.append(self._preset.identification.prefilter_hz)
        if len(calls) == 2:
            raise RuntimeError("a worker died")
        return search_once(self, recording, data)

    monkeypatch.setattr(StructureSearch, "_search", failing_second)
    s = StructureSearch(2, 1, 0, settings=preset)
    with pytest.raises(RuntimeError, match="a worker died"):
        s.fit(two_masses)
    assert calls[0] == 25.0 and calls[1] > 25.0  # it did widen
    assert s.widened_ is None and s.settings.identification.prefilter_hz == 25.0
    assert s.best_structure_ and s.settings.widen_prefilter  # the first search, as it was


@pytest.mark.parametrize("kept", [True, False])
def test_the_second_answer_stands_only_where_it_explains_the_peak(two_masses, monkeypatch,
                                                                    kept) -> None:  # fmt: skip
    # widening.judged decides; where it says no, the first search's answer comes back whole
    preset = data_settings(estimate_scales(two_masses), position=True, wide=True,
                           allowed=("two_mass", "viscous"), final_top=0, polish_rounds=0)  # fmt: skip
    judged = widening.judged

    def verdict(search, data, record):
        out = judged(search, data, record) | {"kept": kept}
        seen.append((search.best_evaluation_, search.history_))
        return out

    seen: list = []
    monkeypatch.setattr(widening, "judged", verdict)
    s = StructureSearch(2, 1, 0, settings=preset).fit(two_masses)
    second, history = seen[0]
    assert (s.best_evaluation_ is second) == kept and (s.history_ is history) == kept
    assert s.settings.identification.prefilter_hz == (s.widened_["to_prefilter_hz"] if kept
                                                      else 25.0)  # fmt: skip
    assert s.widened_["kept"] is kept


def test_a_residual_that_cannot_be_simulated_widens_nothing_and_keeps_the_first(
    two_masses, monkeypatch
) -> None:
    import models.drivetrain.fit_evidence as fit_evidence

    def broken(*args, **kwargs):
        raise RuntimeError("no native build")

    preset = data_settings(estimate_scales(two_masses), position=True, wide=True)
    search = _answer(two_masses, preset)
    monkeypatch.setattr(fit_evidence, "answer_residuals", broken)
    assert widening.wider(search, preset, as_arrays(two_masses)) is None
    record = widening.judged(search, as_arrays(two_masses), {"first_structure": ["one_mass"]})
    assert record["kept"] is False and record["second_periodic"] is None

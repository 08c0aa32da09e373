"""The search's choice by the data's evidence (issue 26, ``GPSettings.final_alpha``,
``models.drivetrain.gp.selection``): the effective sample count of the prefiltered RSS, the
F-test rule (a richer structure wins only when it fits significantly better), the final stage
that applies it, and the rival table a search shows (the same rule on the same fits)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from models.drivetrain.evidence import f_test
from models.drivetrain.excitation import reference_recording
from models.drivetrain.gp import final_gain, finalists, selection
from models.drivetrain.gp.evaluate import Evaluation
from models.drivetrain.gp.presets import data_settings, paper_settings
from models.drivetrain.gp.search import StructureSearch
from models.drivetrain.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.gp.signals import lowpass
from models.drivetrain.scales import estimate_scales
from models.drivetrain.search_evidence import search_rival_table
from models.drivetrain.submodels import canonical

N_EFF = 150.0  # 3 s at 1 kHz through the 25 Hz prefilter (N 2 f_c / f_s)


def _ev(structure, rss, d, refined=True, k_p=2.0) -> Evaluation:
    kinds = canonical(structure)
    params = {f"p{i}": 1.0 for i in range(d)}
    return Evaluation(tuple(k.value for k in kinds), tuple(k.code for k in kinds), params,
                      rss, rss, 1.0 / (rss * (1.0 + k_p * d)), d, 1, 0.0, False,
                      refined=refined)  # fmt: skip


TWO = ["two_mass", "gravity"]  # d 5
THREE = ["three_mass", "gravity"]  # d 8
FOUR = ["four_mass", "gravity"]  # d 11


def test_prefilter_count_is_the_bandwidth_share_and_the_chi_square_of_filtered_noise():
    n, dt, fc = 3000, 1e-3, 25.0
    count = selection.prefilter_count(n, fc, dt)
    assert count == pytest.approx(n * 2 * fc * dt, rel=0.05)  # an ideal low-pass's share
    assert selection.prefilter_count(n, 0.0, dt) == n  # no filter: every sample
    assert selection.prefilter_count(n, 600.0, dt) == n  # at/above Nyquist: off
    # the filtered noise's RSS is a scaled chi-square with about that many degrees of freedom
    f, rng = lowpass(fc, dt), np.random.default_rng(1)
    rss = np.array([np.sum(f(rng.standard_normal(n)) ** 2) for _ in range(600)])
    dof = 2.0 * rss.mean() ** 2 / rss.var()
    assert dof == pytest.approx(count, rel=0.2)
    assert not dof == pytest.approx(n, rel=0.5)


def test_the_f_test_on_the_effective_count_holds_its_level_on_prefiltered_noise():
    # in-band regressors, two of them irrelevant: the richer fit is "significant" at 5 % about
    # 5 % of the time with the prefilter's count, nearly always with the raw sample count
    n, dt, fc = 1000, 1e-3, 25.0
    t = np.arange(n) * dt
    f = lowpass(fc, dt)
    x = np.column_stack([np.sin(2 * np.pi * k * t) for k in (1, 3, 5, 7)] + [np.ones(n)])
    fx = f(x)
    count = selection.prefilter_count(n, fc, dt)
    rng = np.random.default_rng(2)
    hits_eff = hits_raw = 0
    trials = 300
    for _ in range(trials):
        fy = f(x[:, [0, 4]] @ [1.0, 0.5] + 0.1 * rng.standard_normal(n))
        rss = [float(np.sum((fy - fx[:, c] @ np.linalg.lstsq(fx[:, c], fy, rcond=None)[0]) ** 2))
               for c in ([0, 4], [0, 1, 2, 4])]  # fmt: skip
        hits_eff += f_test(rss[0], 2, rss[1], 4, count)[1] < 0.05
        hits_raw += f_test(rss[0], 2, rss[1], 4, n)[1] < 0.05
    assert hits_eff / trials < 0.10
    assert hits_raw / trials > 0.5


def test_a_richer_structure_wins_when_it_fits_significantly_better():
    # recovery machine #3 (four_mass+gravity): the truth fits 16 % better than two masses;
    # the paper's fitness keeps two masses, the evidence moves to four
    two, four = _ev(TWO, 0.110, 5), _ev(FOUR, 0.092, 11)
    assert two.fitness > four.fitness
    chosen, steps = selection.choose(two, [two, four], N_EFF, 0.01)
    assert chosen is four
    assert [(s.before, s.after) for s in steps] == [(two.structure, four.structure)]
    assert steps[0].p_value < steps[0].level == pytest.approx(0.01)


def test_a_richer_structure_within_the_noise_does_not_win():
    # machines #1 and #5: the richer truth changes the RSS by < 0.3 %
    two, four = _ev(TWO, 0.110, 5), _ev(FOUR, 0.1097, 11)
    assert selection.choose(two, [two, four], N_EFF, 0.01) == (two, [])
    # nor a richer one that fits worse, nor one with as many parameters
    assert selection.choose(two, [two, _ev(FOUR, 0.2, 11), _ev(THREE, 0.01, 5)], N_EFF,
                            0.01)[0] is two  # fmt: skip
    # the raw count would have called it significant: the count matters
    assert selection.p_value(two, four, 3000) > 0.01
    assert selection.p_value(two, _ev(FOUR, 0.105, 11), 3000) < 0.01
    assert selection.p_value(two, _ev(FOUR, 0.105, 11), N_EFF) > 0.01


def test_the_level_is_shared_over_the_richer_candidates_and_the_moves_repeat():
    two = _ev(TWO, 0.110, 5)
    marginal = _ev(THREE, 0.101, 8)  # p between 0.01 / 3 and 0.01
    p = selection.p_value(two, marginal, N_EFF)
    assert 0.01 / 3 < p < 0.01
    assert selection.choose(two, [two, marginal], N_EFF, 0.01)[0] is marginal
    others = [_ev(["two_mass", "gravity", k], 0.1099, 6) for k in ("delay", "viscous")]
    assert selection.choose(two, [two, marginal, *others], N_EFF, 0.01)[0] is two
    # from two to three masses, then on to four; the fewest parameters first
    three, four = _ev(THREE, 0.080, 8), _ev(FOUR, 0.060, 11)
    chosen, steps = selection.choose(two, [two, four, three], N_EFF, 0.01)
    assert chosen is four and [s.after for s in steps] == [three.structure, four.structure]
    assert selection.choose(two, [two, four, three], N_EFF, 0.0) == (two, [])


class _FakeDispatch:
    """A final stage's dispatcher that "identifies" each spec as given in ``fits``."""

    def __init__(self, fits):
        self.fits, self.cache, self.n_identifications, self.asked = fits, {}, 0, []
        self.specs = []

    def run(self, jobs):
        for k, spec in jobs:
            self.asked.append(spec.structure)
            self.specs.append(spec)
            self.cache[k] = self.fits[spec.structure]
            self.n_identifications += 1


def _stage(fits, search_fits, n_eff):
    s = GPSettings(final_top=1, final_rounds=2, final_alpha=0.01,
                   allowed=("one_mass", "two_mass", "three_mass", "four_mass", "gravity"))  # fmt: skip
    cache = {json.dumps(list(ev.structure)): ev for ev in search_fits}
    dispatch = _FakeDispatch(fits)
    out, frame, steps = finalists.run(search_fits[0], cache, s, dispatch, n_eff)
    return out, frame, steps, dispatch


def test_a_refit_far_from_significance_is_skipped_only_when_the_answers_residuals_are_white():
    # three richer candidates, so their short fits choose the refits; four masses' short fit
    # gains nothing (p about 1: its switched-off spring cannot find the mode in 40 steps) and
    # its full fit would be significant. Residuals that fail their tests say something is
    # missing: every one of the RICHER is refitted and the stage moves to four masses. White
    # residuals: it is skipped (p > P_REFIT), the answer stays
    delay = [*TWO, "delay"]
    search = [_ev(TWO, 0.110, 5), _ev(THREE, 0.2, 8), _ev(FOUR, 0.3, 11, refined=False),
              _ev(delay, 0.12, 6)]  # fmt: skip
    short = {ev.structure: ev for ev in (_ev(THREE, 0.100, 8), _ev(FOUR, 0.1095, 11),
                                         _ev(delay, 0.1101, 6))}  # fmt: skip
    fits = {ev.structure: ev for ev in (_ev(TWO, 0.110, 5), _ev(["one_mass", "gravity"], 1.0, 2),
                                        _ev(["two_mass"], 0.5, 4), _ev(THREE, 0.121, 8),
                                        _ev(FOUR, 0.080, 11), _ev(delay, 0.1099, 6))}  # fmt: skip
    assert selection.p_value(search[0], short[tuple(FOUR)], N_EFF) > finalists.P_REFIT
    s = GPSettings(final_top=0, final_rounds=1, final_alpha=0.01,
                   allowed=("one_mass", "two_mass", "three_mass", "four_mass", "gravity",
                            "delay"))  # fmt: skip

    def stage(white: bool):
        cache = {json.dumps(list(ev.structure)): ev for ev in search}
        screens = finalists.Screens(lambda _s: _FakeDispatch(short), s)
        dispatch = _FakeDispatch(fits)
        out, _, _ = finalists.run(search[0], cache, s, dispatch, N_EFF, screens,
                                  white=lambda ev: white)  # fmt: skip
        return out, dispatch.asked, screens.rows()

    out, asked, rows = stage(white=False)
    assert out.structure == tuple(FOUR) and tuple(FOUR) in asked
    assert {r["p_refit"] for r in rows} == {1.0}
    out, asked, rows = stage(white=True)
    assert out.structure == tuple(TWO) and tuple(FOUR) not in asked and tuple(THREE) in asked
    assert {r["p_refit"] for r in rows} == {finalists.P_REFIT}
    assert [r["refit"] for r in rows if r["names"] == ",".join(FOUR)] == [False]


def test_the_final_stage_refits_richer_structures_and_moves_to_a_significant_one():
    # the search ended at two masses (fittest by eq. 19), four masses only screened there,
    # stalled; the stage refits it and it fits significantly better: it becomes the answer
    search = [_ev(TWO, 0.110, 5), _ev(FOUR, 0.3, 11, refined=False), _ev(THREE, 0.2, 8)]
    fits = {ev.structure: ev for ev in (_ev(TWO, 0.110, 5), _ev(["one_mass", "gravity"], 1.0, 2),
                                        _ev(["two_mass"], 0.5, 4), _ev(THREE, 0.121, 8),
                                        _ev(FOUR, 0.092, 11), _ev(["four_mass"], 0.5, 10),
                                        _ev(["three_mass"], 0.5, 7))}  # fmt: skip
    out, frame, steps, _ = _stage(fits, search, N_EFF)
    assert out.structure == tuple(FOUR) and steps[-1].after == tuple(FOUR)
    assert (frame["names"] == "four_mass,gravity").sum() == 1  # refitted, once
    assert frame[frame["names"] == "four_mass,gravity"]["round"].tolist() == [0]
    assert frame[frame["chosen"]]["names"].unique().tolist() == ["four_mass,gravity"]
    # the same stage without the evidence (n_eff 0, as final_alpha 0): eq. 19 keeps two masses
    out0, _, steps0, _ = _stage(fits, search, 0.0)
    assert out0.structure == tuple(TWO) and steps0 == []
    # nor does it move when the refit gains only noise
    fits[tuple(FOUR)] = _ev(FOUR, 0.1095, 11)
    assert _stage(fits, search, N_EFF)[0].structure == tuple(TWO)


def test_the_richer_refits_contain_the_answer_and_start_from_it():
    # the answer two masses + gravity; the search's richer fits: three masses + gravity (it
    # contains the answer), a four-mass ladder without gravity (it does not: not the F-test's
    # nested pair) and two masses + gravity + delay; the stage refits the two that contain it,
    # each from the answer's parameters with what it adds switched off
    s = GPSettings(allowed=("one_mass", "two_mass", "three_mass", "four_mass", "gravity",
                            "delay"))  # fmt: skip
    two = replace(_ev(TWO, 0.110, 5), parameters={"J1": 0.02, "J2": 0.03, "c1": 80.0,
                                                  "d1": 0.1, "M_G": 0.5})  # fmt: skip
    search = [two, _ev(THREE, 0.2, 8, refined=False), _ev(["four_mass"], 0.05, 10),
              _ev([*TWO, "delay"], 0.3, 6)]  # fmt: skip
    jobs = finalists.richer_jobs(two, search, N_EFF, set(), s)
    assert [sp.structure for _, sp in jobs] == [
        ("three_mass", "gravity"), ("two_mass", "gravity", "delay")]  # fmt: skip
    three = dict(jobs[0][1].start)
    specs = {sp.name: sp for sp in s.specs("three_mass")}
    assert three["c2"] == specs["c2"].upper and three["d2"] == specs["d2"].lower
    assert three["J3"] == specs["J3"].lower
    assert three["J2"] == pytest.approx(0.03 - specs["J3"].lower)
    assert {k: three[k] for k in ("J1", "c1", "d1", "M_G")} == {
        "J1": 0.02, "c1": 80.0, "d1": 0.1, "M_G": 0.5}  # fmt: skip
    delay = dict(jobs[1][1].start)
    assert delay["T_d"] == min(max(0.0, s.specs("delay")[0].lower), s.specs("delay")[0].upper)


def _richer_case():
    """A two-mass answer, three richer candidates in the search (four masses stalled there,
    p 1) and their short fits from the answer (four masses far below it)."""
    s = GPSettings(allowed=("one_mass", "two_mass", "three_mass", "four_mass", "gravity",
                            "delay"))  # fmt: skip
    two = replace(_ev(TWO, 0.110, 5), parameters={"J1": 0.02, "J2": 0.03, "c1": 80.0,
                                                  "d1": 0.1, "M_G": 0.5})  # fmt: skip
    delay = [*TWO, "delay"]
    search = [two, _ev(THREE, 0.115, 8), _ev(FOUR, 1.0, 11), _ev(delay, 0.1095, 6)]
    short = {ev.structure: ev for ev in (_ev(THREE, 0.100, 8), _ev(delay, 0.1095, 6),
                                         replace(_ev(FOUR, 0.080, 11), parameters={"J4": 0.4}))}  # fmt: skip
    return s, two, delay, search, short


def test_the_richer_refits_are_chosen_by_short_fits_from_the_answer():
    # the truth (four masses + gravity) stalled in the search above the answer's RSS: its p
    # is 1 and the search's fits alone put it last of three candidates (RICHER = 2 refits).
    # Fitted briefly from the answer's start, it drops well below: it is refitted, from its
    # short fit's parameters; the short fits run at the answer's gain, from its start
    s, two, delay, search, short = _richer_case()
    assert finalists.RICHER == 2
    plain = finalists.richer_jobs(two, search, N_EFF, set(), s)
    assert tuple(FOUR) not in [sp.structure for _, sp in plain]
    gains: list[float] = []

    def screen(gain):
        gains.append(gain)
        return _FakeDispatch(short)

    jobs = finalists.richer_jobs(two, search, N_EFF, set(), s, screen=screen)
    assert [sp.structure for _, sp in jobs] == [tuple(FOUR), tuple(THREE)]
    assert dict(jobs[0][1].start) == {"J4": 0.4}  # from the short fit
    assert gains == [s.f_tanh]  # the answer was fitted at the search's gain
    gains.clear()
    # the short fits started where the plain route's refits start: the answer, switched off
    starts = [sp for _, sp in finalists.richer_jobs(two, search, N_EFF, set(), s, n=3)]
    fake = _FakeDispatch(short)
    finalists.screened(two, starts, s, lambda gain: fake)
    assert fake.asked == [sp.structure for sp in starts]
    assert [dict(sp.start) for sp in fake.specs] == [dict(sp.start) for sp in starts]
    # an answer at a gain the stage estimated (it counts d + 1 = 6): a structure one
    # submodel richer (two masses + gravity + delay, d 6 in the search) still contains it
    est = final_gain.with_gain(two, 3.3, True, (), n_params=6)
    wide = finalists.richer_jobs(est, search, N_EFF, set(), s, n=5)
    assert {sp.structure for _, sp in wide} == {tuple(FOUR), tuple(THREE), tuple(delay)}
    assert {sp.f_tanh for _, sp in wide} == {3.3}  # profiled from the answer's gain
    # the short fits run at the answer's gain and count it (d + 1)
    gains.clear()
    fits = finalists.screened(est, starts, s, screen)
    assert gains == [3.3] and [ev.n_params for ev in fits] == [short[sp.structure].n_params + 1
                                                                 for sp in starts]  # fmt: skip
    four = next(ev for ev in fits if ev.structure == tuple(FOUR))
    assert four.fitness == pytest.approx(1.0 / (0.080 * (1.0 + 2.0 * 12)))
    gains.clear()
    # two candidates or fewer: all are refitted, nothing is screened
    assert finalists.richer_jobs(two, search[:3], N_EFF, set(), s, screen=screen) == \
        finalists.richer_jobs(two, search[:3], N_EFF, set(), s)  # fmt: skip
    assert gains == []
    settings = finalists.screen_settings(finalists.final_settings(s), 7.5)
    ident = settings.identification
    assert (settings.f_tanh, ident.n_starts, ident.max_nfev, ident.screen_nfev) == (7.5, 1, 40, 0)
    assert (ident.extend_rounds, ident.backlash_smoothing, ident.ladder_seed) == (0, (), False)


def test_with_white_residuals_only_short_fits_near_significance_are_refitted():
    # a short fit far from significance is not refitted: only those at p <= p_refit, and
    # only where the answer's residuals are white (asked only when short fits choose)
    s, two, _delay, search, short = _richer_case()

    def screen(gain):
        return _FakeDispatch(short)

    p_four, p_three = (selection.p_value(two, short[tuple(x)], N_EFF) for x in (FOUR, THREE))
    assert p_four < 1e-6 < 1e-3 < p_three <= finalists.P_REFIT
    white = {"screen": screen, "white": lambda ev: True}
    only = finalists.richer_jobs(two, search, N_EFF, set(), s, **white, p_refit=1e-3)
    assert [sp.structure for _, sp in only] == [tuple(FOUR)]
    assert finalists.richer_jobs(two, search, N_EFF, set(), s, **white, p_refit=0.0) == []
    off = finalists.richer_jobs(two, search, N_EFF, set(), s, screen=screen,
                                white=lambda ev: False, p_refit=1e-3)  # fmt: skip
    assert [sp.structure for _, sp in off] == [tuple(FOUR), tuple(THREE)]  # residuals not white
    asked: list = []
    finalists.richer_jobs(two, search[:3], N_EFF, set(), s, screen=screen,
                          white=lambda ev: asked.append(ev) or True)  # fmt: skip
    assert asked == []  # two candidates or fewer: nothing screened, the residuals not asked
    noted = finalists.Screens(lambda _s: _FakeDispatch(short), s)
    finalists.richer_jobs(two, search, N_EFF, set(), s, screen=noted, white=white["white"],
                          p_refit=1e-3)  # fmt: skip
    rows = {r["names"]: r for r in noted.rows()}
    assert [rows[",".join(FOUR)]["refit"], rows[",".join(THREE)]["refit"]] == [True, False]
    assert rows[",".join(THREE)]["p"] == pytest.approx(p_three)
    assert {r["answer"] for r in rows.values()} == {",".join(TWO)}
    assert {r["p_refit"] for r in rows.values()} == {1e-3}


def _exact(structure, rss, d, floor=1e-10, k_p=2.0) -> Evaluation:
    """A fit of a noise-free recording: its fitness charges the floor where ``rss`` lies below
    it (``evaluate.FLOOR`` of the output's sum of squares), as ``evaluate.identify``'s does."""
    ev = _ev(structure, rss, d, k_p=k_p)
    return replace(ev, fitness=1.0 / (max(rss, floor) * (1.0 + k_p * d)))


def test_below_the_fitness_floor_a_richer_fit_is_no_better():
    # noise-free: the answer is exact (RSS below the floor); a richer fit ends lower still,
    # by rounding. On the raw RSS that was a drop of 99 %, "significant"; at the floor none
    two, three = _exact(TWO, 2e-15, 5), _exact(THREE, 2e-17, 8)
    assert selection.at_floor(two, 2.0) and selection.fitness_rss(two, 2.0) == pytest.approx(1e-10)
    assert selection.p_value(two, three, N_EFF) < 1e-6  # the raw RSS
    assert selection.p_value(two, three, N_EFF, k_p=2.0) == 1.0
    assert selection.choose(two, [two, three], N_EFF, 0.01, k_p=2.0) == (two, [])
    # above the floor the RSS is the fit's own: nothing changes
    above = _exact(TWO, 0.110, 5)
    assert not selection.at_floor(above, 2.0) and selection.fitness_rss(above, 2.0) == 0.110
    four = _exact(FOUR, 0.092, 11)
    assert selection.p_value(above, four, N_EFF, 2.0) == selection.p_value(above, four, N_EFF)
    assert selection.choose(above, [above, four], N_EFF, 0.01, k_p=2.0)[0] is four


def test_the_final_stage_fits_nothing_that_cannot_beat_an_exact_answer():
    # the answer two masses + gravity fits to the floor: the richer structures and those with
    # as many parameters cannot win (eq. 19 charges them at least as much), only the simpler
    two = _exact(TWO, 2e-15, 5)
    search = [two, _exact(FOUR, 0.3, 11), _exact(THREE, 0.2, 8), _exact(["two_mass"], 0.5, 4)]
    fits = {ev.structure: ev for ev in (_exact(["one_mass", "gravity"], 1.0, 2),
                                        _exact(["two_mass"], 0.5, 4), _exact(THREE, 1e-16, 8),
                                        _exact(FOUR, 1e-16, 11), _exact(["three_mass"], 0.5, 7),
                                        _exact(["four_mass"], 0.5, 10))}  # fmt: skip
    out, frame, steps, dispatch = _stage(fits, search, N_EFF)
    assert out is two and steps == []
    assert sorted(dispatch.asked) == [("one_mass", "gravity"), ("two_mass",)]
    assert sorted(frame["names"]) == ["one_mass,gravity", "two_mass"]
    # the same answer above the floor: the richer ones are refitted as before
    above = _exact(TWO, 0.110, 5)
    _, _, _, dispatch = _stage(fits | {above.structure: above}, [above, *search[1:]], N_EFF)
    assert tuple(FOUR) in dispatch.asked


def test_the_reference_and_the_paper_do_not_choose_by_the_evidence():
    gp = data_settings(estimate_scales(reference_recording()), position=False)
    assert gp.final_alpha == 0.01 and gp.final_top == 3
    assert GPSettings().final_alpha == 0.0 and GPSettings().final_top == 0
    assert paper_settings(gp).final_alpha == 0.0 and paper_settings(gp).final_top == 0
    with pytest.raises(Exception, match="final_alpha"):
        GPSettings(final_alpha=1.5)


def test_the_search_rival_table_agrees_with_the_rule():
    best = ((2, 8), ("two_mass", "gravity"), 0.110, 5)
    rows = [((1, 8), ("one_mass", "gravity"), 0.5, 2, "simpler"),
            ((3, 8), ("three_mass", "gravity"), 0.092, 8, "richer"),
            ((2, 8, 9), ("two_mass", "gravity", "delay"), 0.1099, 6, "richer")]  # fmt: skip
    table = search_rival_table(best, rows, 3000, N_EFF, alpha=0.01, m=2)
    assert table.preferred == (3, 8) and not table.agrees
    rows[1] = ((3, 8), ("three_mass", "gravity"), 0.108, 8, "richer")
    table = search_rival_table(best, rows, 3000, N_EFF, alpha=0.01, m=2)
    assert table.agrees and "0.01" in table.rule
    # the search's own count of richer candidates sets the level when it is the larger
    marginal = ((3, 8), ("three_mass", "gravity"), 0.101, 8, "richer")
    assert search_rival_table(best, [marginal], 3000, N_EFF, alpha=0.01, m=1).preferred == (3, 8)
    assert search_rival_table(best, [marginal], 3000, N_EFF, alpha=0.01, m=5).agrees


@pytest.mark.slow
def test_a_search_with_the_evidence_shows_a_table_that_agrees_with_its_answer():
    from models.drivetrain.search_evidence import search_evidence

    rec = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
    small = dict(allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
                 identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False))  # fmt: skip
    search = StructureSearch(population=4, generations=1, seed=0, polish_rounds=0,
                             final_top=2, final_alpha=0.01, **small).fit(rec)  # fmt: skip
    assert search.selection_["alpha"] == 0.01 and search.selection_["n_eff"] > 0
    ev = search_evidence(search, rec)
    assert ev.rivals is not None and ev.rivals.agrees
    assert "search's rule" in ev.rivals.rule

"""The search's final stage (issue 26, ``GPSettings.final_top``, ``gp.finalists``) and the
recovery benchmark's diagnosis of a missed structure (``benchmarks._search_diagnosis``)."""

from __future__ import annotations

import pytest

from benchmarks._search_diagnosis import miss_kind, relation, truth_in_search
from methods.errors import InputError
from models.drivetrain.excitation import reference_recording
from models.drivetrain.gp import finalists, operators
from models.drivetrain.gp.evaluate import Evaluation
from models.drivetrain.gp.presets import data_settings, paper_settings
from models.drivetrain.gp.search import StructureSearch
from models.drivetrain.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.scales import estimate_scales
from models.drivetrain.submodels import canonical

SMALL = dict(
    allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
    identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False),
)
TRUTH = ["one_mass", "coulomb", "viscous"]


@pytest.fixture(scope="module")
def recording():
    return reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)


def _ev(structure, fitness, refined=True, **params) -> Evaluation:
    kinds = canonical(structure)
    return Evaluation(tuple(k.value for k in kinds), tuple(k.code for k in kinds), params,
                      1.0 / fitness, 1.0 / fitness, fitness, len(params), 1, 0.0, False,
                      refined=refined)  # fmt: skip


def _map_reversed(fn, batches):  # a backend that finishes in another order
    return [fn(b) for b in batches[::-1]][::-1]


def test_relation_of_a_found_structure_to_the_truth():
    truth = ["two_mass", "coulomb", "stribeck"]
    assert relation(["stribeck", "two_mass", "coulomb"], truth) == "same"
    assert relation(["three_mass", "coulomb", "stribeck"], truth) == "richer"
    assert relation(["two_mass", "coulomb", "stribeck", "delay"], truth) == "richer"
    assert relation(["one_mass", "coulomb"], truth) == "simpler"
    assert relation(["two_mass", "coulomb"], truth) == "simpler"
    assert relation(["three_mass", "coulomb"], truth) == "other"
    assert relation(["two_mass", "viscous", "coulomb", "stribeck"], ["one_mass"]) == "richer"


def test_a_miss_is_classified_by_what_the_search_knew_of_the_truth():
    # the answer two masses (RSS 0.110, d 5, fitness by eq. 19), n_eff 150, level 0.01 / 4
    sel = {"n_eff": 150.0, "m": 4, "alpha": 0.01}
    row = {"relation": "simpler", "rss": 0.110, "d": 5, "fitness": 1 / (0.110 * 11),
           "selection": sel}  # fmt: skip

    def truth(rss, d, refined=True):
        return {"rss": rss, "n_params": d, "refined": refined, "fitness": 1 / (rss * (1 + 2 * d))}

    assert miss_kind(row | {"truth_in_search": None}).endswith("the truth never tried")
    assert miss_kind(row | {"truth_in_search": truth(0.05, 8, False)}).endswith("only screened")
    # a richer truth 0.3 % better (within the noise), 16 % better (p 3e-4 < 0.0025)
    assert miss_kind(row | {"truth_in_search": truth(0.1097, 8)}).endswith(
        "not supported by the data")  # fmt: skip
    assert miss_kind(row | {"truth_in_search": truth(0.092, 8)}).endswith("missed by the rule")
    # an answer richer than the truth and far better: the truth's fit stalled
    rich = row | {"relation": "richer", "truth_in_search": truth(0.5, 2)}
    assert miss_kind(rich).endswith("the truth's fit stalled (the answer significantly better)")
    assert "eq. 19 preferred" in miss_kind(row | {"relation": "other",
                                                  "truth_in_search": truth(0.2, 5)})  # fmt: skip

    # a richer truth no better than the answer it nests: its fit stalled (p 1: not the data)
    assert miss_kind(row | {"truth_in_search": truth(0.1722, 8)}).endswith(
        "the truth's fit stalled (no better than the answer)")  # fmt: skip

    # fitted alone at the answer's settings (--diagnose): the same rules on the better of the
    # two fits; supported by the data, the search missed it
    def alone(rss, d, searched=None, **more):
        fit = {"rss": rss, "d": d, "fitness": 1 / (rss * (1 + 2 * d))}
        return row | {"truth_in_search": searched, "truth_alone": fit} | more

    assert miss_kind(alone(0.1097, 8)) == (
        "another structure (simpler): the truth never tried; alone: the truth not supported by "
        "the data")  # fmt: skip
    assert miss_kind(alone(0.092, 8)).endswith(
        "never tried; alone: the truth supported by the data"
    )
    assert miss_kind(alone(0.092, 8, truth(0.1722, 8))).endswith(
        ": the truth fitted better alone: the truth supported by the data")  # fmt: skip
    assert miss_kind(alone(0.2, 8, truth(0.092, 8))).endswith("missed by the rule")  # search's
    assert miss_kind(alone(float("inf"), 8)).endswith("alone: the truth's fit stalled (no better "
                                                      "than the answer)")  # fmt: skip
    assert miss_kind(alone(0.5, 2, relation="richer")).endswith(
        "never tried; alone: the truth's fit stalled (the answer significantly better)")  # fmt: skip
    # not nested: eq. 19 alone decides, and says which way
    assert miss_kind(alone(0.05, 5, relation="other")).endswith(
        "the truth fits better by eq. 19 (1.82 > 0.826: the search's miss)")  # fmt: skip
    assert miss_kind(alone(0.5, 5, relation="other")).endswith(
        "eq. 19 prefers the answer (truth fitness 0.182 <= 0.826)")  # fmt: skip
    # hostile rows: numbers that are not, an evidence record without its count
    for bad in ({"rss": 0.09}, {"rss": "a", "d": 8, "fitness": 1.0},
                {"rss": None, "d": 8, "fitness": 1.0}, {"rss": 0.09, "d": None, "fitness": 1.0},
                {"rss": 0.09, "d": 8, "fitness": None}, "x"):  # fmt: skip
        assert miss_kind(row | {"truth_in_search": None, "truth_alone": bad}).endswith(
            "the truth never tried")  # fmt: skip
    assert miss_kind(alone(0.092, 8) | {"selection": {"alpha": 0.01, "m": 4}}).endswith(
        "the truth never tried")  # fmt: skip
    # a row from before the evidence's numbers were kept: the relation alone
    assert miss_kind(row | {"selection": {}, "truth_in_search": truth(0.092, 8)}) == (
        "another structure (simpler)")  # fmt: skip


def test_candidates_are_the_fittest_refined_and_the_best_one_step_simpler():
    s = GPSettings(**SMALL)
    best = _ev(["one_mass", "coulomb", "viscous", "gravity"], 10.0, J1=1, M_C=1, f_v=1, M_G=0)
    evals = [best, _ev(["two_mass", "viscous"], 9.0, J1=1, J2=1, c1=1, d1=1, f_v=1),
             _ev(["one_mass", "viscous"], 8.0, J1=1, f_v=2),
             _ev(["one_mass", "coulomb", "viscous"], 20.0, refined=False, J1=3, M_C=3, f_v=3),
             _ev(["one_mass"], 1.0, J1=1)]  # fmt: skip
    jobs = finalists.candidates(best, evals, s, set(), top=2)
    got = {sp.structure: dict(sp.start) for _, sp in jobs}
    # the 2 fittest refined ones (the screened-only {1,5,6} is not among them, however fit)
    # and the best's four one-step simplifications, from their own fits where the search had one
    assert set(got) == {
        ("one_mass", "coulomb", "viscous", "gravity"), ("two_mass", "viscous"),
        ("one_mass", "viscous", "gravity"), ("one_mass", "coulomb", "gravity"),
        ("one_mass", "coulomb", "viscous")}  # fmt: skip
    assert got[("one_mass", "coulomb", "viscous")] == {"J1": 3, "M_C": 3, "f_v": 3}
    assert got[("one_mass", "viscous", "gravity")] == {"J1": 1, "f_v": 1, "M_G": 0}
    # ... with the best's inherited parameters as the other start (the better one is taken)
    also = {sp.structure: sp.also for _, sp in jobs}
    assert dict(also[("one_mass", "coulomb", "viscous")]) == {"J1": 1, "M_C": 1, "f_v": 1}
    assert also[("one_mass", "viscous", "gravity")] is None  # no search fit: inherited alone
    order = [sp.structure for _, sp in jobs]
    assert all(sp.refine for _, sp in jobs) and order == sorted(order)
    assert all(k == finalists.key(sp.structure) for k, sp in jobs)
    done = {("two_mass", "viscous"), ("one_mass", "coulomb", "viscous")}
    again = {sp.structure for _, sp in finalists.candidates(best, evals, s, done, top=2)}
    assert again == set(got) - done


def test_a_current_loop_and_a_dead_time_are_swapped_with_their_time_constant():
    # seed-0 machine #2: the truth had a dead time, the answer a current loop, the search never
    # fitted the truth; the stage fits the answer's swap, from its own time constant
    s = GPSettings(allowed=("three_mass", "coulomb", "current_control", "delay"))
    best = _ev(["three_mass", "coulomb", "current_control"], 10.0, J1=1, M_C=2, T_1=0.004)
    (swap,) = operators.swaps(best.structure, best.parameters, s)
    assert swap == (("three_mass", "coulomb", "delay"), {"J1": 1, "M_C": 2, "T_d": 0.004})
    (back,) = operators.swaps(*swap, s)
    assert back == (best.structure, {"J1": 1, "M_C": 2, "T_1": 0.004})
    t_d = s.specs("delay")[0]
    far = operators.swaps(best.structure, {"T_1": 10 * t_d.upper}, s)[0][1]
    assert far == {"T_d": t_d.upper}  # clipped to the box
    jobs = {
        sp.structure: dict(sp.start) for _, sp in finalists.candidates(best, [best], s, set(), 0)
    }
    assert jobs[swap[0]] == swap[1]
    # no swap where the function set lacks the other part, or the structure has neither
    narrow = GPSettings(allowed=("three_mass", "coulomb", "current_control"))
    assert operators.swaps(best.structure, best.parameters, narrow) == []
    assert operators.swaps(("one_mass", "coulomb"), {"J1": 1}, s) == []
    both = ("one_mass", "current_control", "delay")  # a swap would repeat a part
    assert operators.swaps(both, {"J1": 1, "T_1": 0.004, "T_d": 0.005}, s) == []


def test_a_stribeck_torque_without_coulomb_friction_is_swapped_for_it():
    # EMPS with the wide boxes (seed 0, 2026-12-07): the search ended at one_mass+viscous+
    # stribeck+gravity and never fitted the Coulomb model, which is fitter; the stage fits it,
    # the breakaway torque as the Coulomb level, the Stribeck velocity dropped
    s = GPSettings()
    params = {"J1": 0.01, "f_v": 0.01, "M_S": 0.3, "dq0": 1.0, "M_G": 0.1}  # inside the boxes
    best = _ev(["one_mass", "viscous", "stribeck", "gravity"], 1.6, **params)
    (swap,) = operators.swaps(best.structure, best.parameters, s)
    assert swap == (("one_mass", "coulomb", "viscous", "gravity"),
                    {"J1": 0.01, "f_v": 0.01, "M_C": 0.3, "M_G": 0.1})  # fmt: skip
    jobs = {sp.structure for _, sp in finalists.candidates(best, [best], s, set(), 0)}
    assert swap[0] in jobs
    # no swap back (Coulomb friction is the usual part), none with both frictions
    assert operators.swaps(swap[0], swap[1], s) == []
    both = ("one_mass", "coulomb", "stribeck")
    assert operators.swaps(both, {"J1": 1, "M_C": 1, "M_S": 1, "dq0": 1}, s) == []


def test_final_settings_continue_without_screening_in_the_search_time_limit():
    s = GPSettings(identification=IdentificationSettings(time_limit_s=77.0))
    ident = finalists.final_settings(s).identification
    assert ident.screen_nfev == 0 and ident.ladder_seed and not ident.backlash_smoothing
    assert ident.max_nfev == 100 and ident.time_limit_s == 77.0


def test_final_stage_moves_a_search_that_ended_richer_to_the_truth(recording):
    # one generation of four without a local search ends at {1,5,6,8}; the final stage
    # identifies it again with its simpler neighbours and moves to the truth {1,5,6}, on any
    # backend the same; off (the default) the search is what it was
    kwargs = dict(population=4, generations=1, seed=0, polish_rounds=0, **SMALL)
    plain = StructureSearch(**kwargs).fit(recording)
    assert plain.best_structure_ == ["one_mass", "coulomb", "viscous", "gravity"]
    assert plain.final_.empty
    final = StructureSearch(final_top=2, **kwargs).fit(recording)
    assert final.best_structure_ == TRUTH
    chosen = final.final_[final.final_["chosen"]]
    assert chosen["codes"].tolist() == ["1,5,6"]
    assert final.best_fitness_ == pytest.approx(chosen["fitness"].max())
    assert final.best_fitness_ > plain.best_fitness_
    assert final.n_evaluations_ == plain.n_evaluations_ + len(final.final_)
    # the stage's fits replace the search's where fitter: the evidence's rivals use them
    assert truth_in_search(final, TRUTH).fitness == final.best_fitness_
    other = StructureSearch(final_top=2, map_batches=_map_reversed, **kwargs).fit(recording)
    assert other.best_parameters_ == final.best_parameters_
    assert other.final_.equals(final.final_.assign(wall_s=other.final_["wall_s"]))


def test_the_data_preset_has_the_final_stage_and_the_paper_has_not():
    gp = data_settings(estimate_scales(reference_recording()), position=False)
    assert gp.final_top == 3 and GPSettings().final_top == 0
    assert paper_settings(gp).final_top == 0


@pytest.mark.parametrize("field", ["final_top", "final_rounds"])
def test_final_stage_settings_refuse_negative_values(field):
    with pytest.raises(InputError, match=field):
        GPSettings(**{field: -1})


def test_the_richer_candidates_short_fits_are_counted_recorded_and_deterministic():
    # a noisy recording (the evidence's choice needs an answer above the fitness's floor):
    # the stage fits more richer candidates briefly than it refits in full; each short fit is
    # an identification of the search and a row of selection_["screened"], on any backend
    rec = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6, noise=0.05)
    small = dict(allowed=("one_mass", "two_mass", "three_mass", "coulomb", "viscous", "gravity",
                          "delay"),
                 identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False))  # fmt: skip
    kwargs = dict(population=6, generations=3, seed=0, polish_rounds=0, **small)
    plain = StructureSearch(**kwargs).fit(rec)
    search = StructureSearch(final_top=2, final_alpha=0.01, **kwargs).fit(rec)
    screened = search.selection_["screened"]
    assert len(screened) > finalists.RICHER
    answer = tuple(search.best_structure_)
    assert all(operators.nests(tuple(r["names"].split(",")), answer) for r in screened)
    # each short fit names the answer it was tested against, its p and whether it was refit:
    # of the RICHER lowest p of each call, those at p_refit or below (P_REFIT where the
    # answer's residuals pass their tests, as this one's do: its truth, else 1), and those are
    # the final stage's fits
    for call in {r["call"] for r in screened}:
        mine = sorted((r for r in screened if r["call"] == call),
                      key=lambda r: (r["p"], r["rss"], r["names"]))  # fmt: skip
        assert all(0.0 <= r["p"] <= 1.0 and r["answer_rss"] > 0 for r in mine)
        assert [r["refit"] for r in mine] == [
            i < finalists.RICHER and r["p"] <= r["p_refit"] for i, r in enumerate(mine)]  # fmt: skip
        assert {r["names"] for r in mine if r["refit"]} <= set(search.final_["names"])
    assert {r["p_refit"] for r in screened} == {finalists.P_REFIT}
    assert any(not r["refit"] and r["p"] > finalists.P_REFIT for r in screened)
    assert search.n_evaluations_ == plain.n_evaluations_ + len(search.final_) + len(screened)
    other = StructureSearch(final_top=2, final_alpha=0.01, map_batches=_map_reversed,
                            **kwargs).fit(rec)  # fmt: skip
    assert other.selection_["screened"] == screened
    assert other.final_.equals(search.final_.assign(wall_s=other.final_["wall_s"]))


def test_a_fit_starts_from_the_better_of_its_start_and_the_other(recording):
    """``IndividualSpec.also``: of a stalled start and a good one, the fit starts from the
    better whichever is given as ``start`` (one simulation each); the key tells them apart."""
    from dataclasses import replace

    from models.drivetrain.gp.evaluate import IndividualSpec, identify
    from models.drivetrain.gp.recording import as_arrays

    s = GPSettings(**SMALL)
    s = replace(s, identification=replace(s.identification, max_nfev=1, extend_rounds=0))
    data = as_arrays(recording)
    good = identify(IndividualSpec(tuple(TRUTH), (), refine=True),
                    data, replace(s, identification=replace(s.identification, max_nfev=40)))  # fmt: skip
    good_start = tuple(sorted(good.parameters.items()))
    bad_start = tuple(sorted({k: 3 * v for k, v in good.parameters.items()}.items()))
    bad = identify(IndividualSpec(tuple(TRUTH), bad_start, refine=True), data, s)
    assert bad.rss > 10 * good.rss  # one evaluation from a bad start stays bad
    for start, also in ((bad_start, good_start), (good_start, bad_start)):
        spec = IndividualSpec(tuple(TRUTH), start, refine=True, also=also)
        assert identify(spec, data, s).rss <= good.rss * (1 + 1e-9)
    keys = {IndividualSpec(tuple(TRUTH), bad_start, also=a).key() for a in (None, good_start)}
    assert len(keys) == 2


def test_a_ladders_fit_with_another_start_seeds_from_one_inertia_fewer_without_it() -> None:
    """A three-mass spec with ``also`` (the final stage's neighbour the search had fitted):
    its ladder seed, the two-mass fit, does not take the three-mass ``also`` (it named J3, c2,
    d2: ``InputError`` and the search stopped), and names ``also`` cannot use are left out."""
    from dataclasses import replace

    from models.drivetrain.gp.evaluate import IndividualSpec, identify
    from models.drivetrain.gp.recording import as_arrays

    structure = ("three_mass", "viscous")
    s = finalists.final_settings(GPSettings(allowed=("three_mass", "viscous")))
    s = replace(s, identification=replace(s.identification, max_nfev=2, extend_rounds=0,
                                          jit=False, n_starts=1))  # fmt: skip
    rec = reference_recording(["three_mass", "viscous"], duration=0.3)
    nominal = {sp.name: sp.nominal for k in structure for sp in s.specs(k)}
    also = tuple(sorted((nominal | {"f_C": 1.0}).items()))  # f_C: not this model's
    ev = identify(IndividualSpec(structure, (), refine=True, also=also), as_arrays(rec), s)
    assert ev.structure == structure and ev.rss > 0

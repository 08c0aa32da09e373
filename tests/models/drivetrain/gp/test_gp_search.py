"""Identification, the picklable batch evaluator, determinism and checkpoint/resume."""

from __future__ import annotations

import functools
import pickle
from dataclasses import replace

import numpy as np
import pytest

from methods.errors import InputError
from models.drivetrain.excitation import reference_recording
from models.drivetrain.gp.evaluate import IndividualSpec, evaluate_batch, identify
from models.drivetrain.gp.search import StructureSearch, as_arrays
from models.drivetrain.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.gp.signals import initial_velocity
from models.drivetrain.simulate import simulate
from models.drivetrain.submodels import parameter_specs

SMALL = dict(
    allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
    identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False),
)


def test_identify_recovers_truth_from_a_perturbed_start(recording):
    data = as_arrays(recording)
    spec = IndividualSpec(("one_mass", "coulomb", "viscous"),
                          (("J1", 0.015), ("M_C", 0.12), ("f_v", 0.017)))  # fmt: skip
    full = IdentificationSettings(n_starts=1, max_nfev=15, jit=False, screen_nfev=0, prefilter_hz=0)
    ev = identify(spec, data, GPSettings(**{**SMALL, "identification": full}))
    # noise-free data and the true structure: the fit is exact up to solver tolerance
    assert ev.parameters == pytest.approx({"J1": 0.01, "M_C": 0.2, "f_v": 0.01}, rel=1e-4)
    # fitness = 1 / (RSS (1 + 2 d)), RSS floored at 1e-14 of the output's sum of squares
    floor = 1e-14 * np.sum((data.y - data.y.mean()) ** 2)
    assert ev.n_params == 3
    assert ev.fitness == pytest.approx(1 / (max(ev.rss, floor) * 7), rel=1e-9)


def test_evaluate_batch_is_picklable_and_pure(recording):

    data = as_arrays(recording)
    fn = functools.partial(evaluate_batch, data=data, settings=GPSettings(**SMALL), seed=0)
    clone = pickle.loads(pickle.dumps(fn))
    spec = IndividualSpec(("one_mass", "viscous"), (("J1", 0.02), ("f_v", 0.02)))
    assert clone([spec])[0].rss == fn([spec])[0].rss


def _reversed_map(fn, batches):  # a "parallel" backend that finishes in another order
    return [fn(b) for b in batches[::-1]][::-1]


def test_search_is_deterministic_and_order_independent(recording):
    a = StructureSearch(population=4, generations=3, seed=2, **SMALL).fit(recording)
    b = StructureSearch(population=4, generations=3, seed=2, map_batches=_reversed_map,
                        **SMALL).fit(recording)  # fmt: skip
    assert a.best_structure_ == b.best_structure_
    assert a.best_parameters_ == b.best_parameters_
    assert a.history_.equals(b.history_)
    assert set(a.history_.columns) >= {"generation", "best_fitness", "best_rss", "best_codes"}
    assert len(a.population_history_) == 12
    assert {"A", "B", "C", "D", "f", "g"} <= set(a.state_space_)


class _Killed(Exception):
    pass


def test_killed_search_resumes_to_the_same_result(recording, tmp_path):
    full = StructureSearch(population=4, generations=5, seed=7, **SMALL).fit(recording)

    def kill_after_three(g, n, best):
        if g == 2:
            raise _Killed

    with pytest.raises(_Killed):
        StructureSearch(population=4, generations=5, seed=7, checkpoint_dir=tmp_path,
                        progress=kill_after_three, **SMALL).fit(recording)  # fmt: skip
    resumed = StructureSearch(population=4, generations=5, seed=7, checkpoint_dir=tmp_path,
                              **SMALL).fit(recording)  # fmt: skip
    assert resumed.resumed_from_ == 3
    assert resumed.best_structure_ == full.best_structure_
    assert resumed.best_parameters_ == full.best_parameters_
    assert resumed.history_.equals(full.history_)


def test_checkpoint_of_another_search_is_refused(recording, tmp_path):
    from methods.errors import InputError

    StructureSearch(population=3, generations=1, seed=1, checkpoint_dir=tmp_path,
                    **SMALL).fit(recording)  # fmt: skip
    with pytest.raises(InputError, match="other settings"):
        StructureSearch(population=3, generations=1, seed=2, checkpoint_dir=tmp_path,
                        **SMALL).fit(recording)  # fmt: skip


def _sim_error(structure, parameters: dict, data, q=None) -> np.ndarray:
    """Simulated minus measured velocity over the whole record, from the initial velocity the
    identification uses (``signals.initial_velocity``: from the first samples, of the
    position ``q`` when the fit weighs it)."""
    y0 = initial_velocity(data.y, q, data.dt)
    return simulate(structure, data.u, data.dt, parameters, y0=y0) - data.y


@pytest.mark.parametrize("test_fraction", [0.0, 0.3])
def test_screening_fits_the_head_and_scores_the_fitness_part(recording, test_fraction):
    """Screening (not refined) fits the head ``screen_fraction`` of the identification part;
    its fitness RSS is the whole record's (or the held-out tail's) at the screened parameters,
    as for a refined individual; refining fits the whole identification part."""
    data = as_arrays(recording)
    spec = IndividualSpec(("one_mass", "viscous"), (("J1", 0.01), ("f_v", 0.01)))
    raw = IdentificationSettings(n_starts=1, max_nfev=15, screen_nfev=8, screen_fraction=0.4,
                                 jit=False, prefilter_hz=0)  # fmt: skip
    settings = GPSettings(**{**SMALL, "identification": raw}, test_fraction=test_fraction)
    n_fit = round((1 - test_fraction) * data.n)
    n_head = round(0.4 * n_fit)
    for refine, fitted in ((False, n_head), (True, n_fit)):
        ev = identify(replace(spec, refine=refine), data, settings)
        err = _sim_error(spec.structure, ev.parameters, data)
        scored = err[n_fit:] if test_fraction else err
        assert ev.rss_train == pytest.approx(err[:fitted] @ err[:fitted], rel=1e-9)
        assert ev.rss == pytest.approx(scored @ scored, rel=1e-9)
        assert ev.nfev <= (8 if not refine else 15) * 2 + 2


def test_train_test_split_uses_the_tail_for_fitness(recording):
    data = as_arrays(recording)
    spec = IndividualSpec(("one_mass", "viscous"), (("J1", 0.01), ("f_v", 0.01)))
    raw = IdentificationSettings(n_starts=1, max_nfev=15, jit=False, prefilter_hz=0,
                                 screen_fraction=1.0)  # fmt: skip
    settings = GPSettings(**{**SMALL, "identification": raw}, test_fraction=0.3, k_p=3.0)
    ev = identify(spec, data, settings)
    # oracle: the identified model simulated through the whole record; head = first 70 %
    err = _sim_error(spec.structure, ev.parameters, data)
    n_fit = round(0.7 * data.n)
    head, tail = err[:n_fit] @ err[:n_fit], err[n_fit:] @ err[n_fit:]
    # the structure misses Coulomb friction: both windows keep a model error far above the
    # RSS floor and differ by far more than the 1e-9 agreement asked below
    assert tail > 1e-6 * np.sum((data.y[n_fit:] - data.y[n_fit:].mean()) ** 2)
    assert abs(head - tail) > 0.1 * min(head, tail)
    # same simulator and arithmetic up to summation order: agreement to rounding (1e-9)
    assert ev.rss_train == pytest.approx(head, rel=1e-9)
    assert ev.rss == pytest.approx(tail, rel=1e-9)
    # paper eq. 19 on the held-out tail, d = 2 (J1, f_v), k_P = 3
    assert ev.fitness == pytest.approx(1.0 / (tail * (1.0 + 3.0 * 2)), rel=1e-9)


@pytest.mark.parametrize("at_once", [True, False])
def test_each_structure_is_identified_once_and_populations_have_no_duplicates(recording, at_once):
    # 16 valid structures in the small function set: 4 x 3 leaves room for novelty
    search = StructureSearch(population=4, generations=3, seed=3, refine_at_once=at_once,
                             polish_rounds=0, **SMALL).fit(recording)  # fmt: skip
    pop = search.population_history_
    n_structures = pop["codes"].nunique()
    n_refined = int(pop.groupby("codes")["refined"].any().sum())
    # one screening per structure, one refinement per refined structure
    assert search.n_evaluations_ == n_structures + n_refined
    if not at_once:  # a second round trip per generation: at most refine_top (2) refinements
        assert n_refined <= 2 * 3
    assert search.best_evaluation_.refined  # the answer always has the full identification
    per_generation = pop.groupby("generation")["codes"].agg(lambda c: c.duplicated().sum())
    assert per_generation.sum() == 0  # avoid_duplicates
    assert search.history_["evaluated_structures"].iloc[-1] == n_structures


@pytest.mark.parametrize("seed", [4, 7])  # seeds whose searches miss one without the move
def test_every_generation_tries_a_simpler_best_while_one_is_left(recording, seed):
    from models.drivetrain.gp.operators import simplifications
    from models.drivetrain.gp.tree import Individual, Node

    search = StructureSearch(population=4, generations=4, seed=seed, **SMALL).fit(recording)
    pop = search.population_history_
    settings = search.settings
    for g in range(1, 4):
        before = set(pop.loc[pop["generation"] < g, "names"])
        best = pop[pop["generation"] == g - 1].sort_values("fitness").iloc[-1]
        ind = Individual(tuple(Node(k, -1 if i == 0 else 0, tuple(best["parameters"].items()))
                               for i, k in enumerate(best["names"].split(","))))  # fmt: skip
        options = {",".join(s.structure) for s in simplifications(ind, settings)} - before
        now = set(pop.loc[pop["generation"] == g, "names"])
        if options:
            assert now & options, (g, best["names"], options, now)


def test_paper_mode_reports_the_fittest_individual_with_the_papers_fitness(recording):
    paper = dict(selection="roulette", structure_cache=False, avoid_duplicates=False,
                 avoid_revisits=False, n_elite=0, simplify_best=False,
                 polish_rounds=0)  # fmt: skip
    raw = IdentificationSettings(n_starts=1, max_nfev=15, jit=False, prefilter_hz=0)
    search = StructureSearch(population=4, generations=2, seed=0, **paper,
                             **{**SMALL, "identification": raw}).fit(recording)  # fmt: skip
    pop = search.population_history_
    assert search.best_fitness_ == pop["fitness"].max()
    # oracle for every individual: its model simulated here, RSS over the whole record and
    # fitness 1 / (max(RSS, floor) (1 + k_P d)), k_P = 2 (paper eq. 19, the documented floor)
    data = as_arrays(recording)
    floor = 1e-14 * np.sum((data.y - data.y.mean()) ** 2)
    for row in pop.itertuples():
        err = _sim_error(row.names.split(","), row.parameters, data)
        d = sum(len(parameter_specs(kind)) for kind in row.names.split(","))
        assert d == len(row.parameters) == row.n_params
        # same simulator, other summation order: 1e-9; exact fits (RSS ~1e-22) match to a
        # small fraction of the floor, below which the RSS does not enter the fitness
        assert row.rss == pytest.approx(err @ err, rel=1e-9, abs=1e-3 * floor)
        assert row.fitness == pytest.approx(1 / (max(err @ err, floor) * (1 + 2 * d)), rel=1e-9)


def test_prefilter_keeps_an_exact_fit_exact_and_suppresses_noise():
    clean = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
    noisy = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6, noise=0.05)
    spec = IndividualSpec(("one_mass", "coulomb", "viscous"),
                          (("J1", 0.01), ("M_C", 0.2), ("f_v", 0.01)))  # fmt: skip
    ident = IdentificationSettings(n_starts=1, max_nfev=15, jit=False, prefilter_hz=25.0)
    off = IdentificationSettings(n_starts=1, max_nfev=15, jit=False, prefilter_hz=0.0)
    raw = dict(SMALL, identification=off)
    settings = GPSettings(**{**SMALL, "identification": ident})
    exact = identify(spec, as_arrays(clean), settings)
    assert exact.rss < 1e-12 * np.sum(as_arrays(clean).y ** 2)
    # white noise of variance s^2: RSS ~ N s^2 raw, ~ N s^2 * 2 * 25 Hz / 1 kHz filtered
    n, s2 = len(noisy), 0.05**2
    assert identify(spec, as_arrays(noisy), GPSettings(**raw)).rss == pytest.approx(n * s2, rel=0.2)
    assert identify(spec, as_arrays(noisy), settings).rss < 0.1 * n * s2


def test_position_weight_trades_velocity_error_for_position_drift():
    # noisy velocity, exact position (as on EMPS); the true structure with a constant offset
    truth = ("one_mass", "viscous", "coulomb", "gravity")
    data = as_arrays(reference_recording(truth, {"M_G": 0.05}, noise=0.05, duration=0.6))
    assert data.q is not None and data.q.shape == data.y.shape
    fits, w = {}, 3.0  # w = 3, not 1: a weight that is ignored shows in the RSS below
    for weight in (0.0, w):
        ident = IdentificationSettings(n_starts=1, max_nfev=40, jit=False, screen_nfev=0,
                                       prefilter_hz=0, position_weight=weight)  # fmt: skip
        ev = identify(
            IndividualSpec(truth, ()), data, GPSettings(**{**SMALL, "identification": ident})
        )
        assert "condition is satisfied" in ev.message  # converged, not out of budget
        err = _sim_error(truth, ev.parameters, data, data.q if weight else None)
        y_sim = err + data.y  # its position: trapezoid integral from the measured q[0]
        y_mid = 0.5 * (y_sim[1:] + y_sim[:-1])
        drift = data.q[0] + np.concatenate([[0.0], np.cumsum(y_mid * data.dt)]) - data.q
        fits[weight] = ev, err @ err, drift @ drift
    (a, vel_a, pos_a), (b, vel_b, pos_b) = fits[0.0], fits[w]
    # documented RSS: velocity error plus (w s_y / s_q)^2 times the position error
    s_y, s_q = np.std(data.y), np.std(data.q)  # root sums of squares, ratio the same
    assert a.rss == pytest.approx(vel_a, rel=1e-9)
    assert b.rss == pytest.approx(vel_b + (w * s_y / s_q) ** 2 * pos_b, rel=1e-9)
    # the velocity-only fit minimises the velocity error, so the weighted one can only trade
    # velocity error (up to solver tolerance, 1e-6) for position drift; measured: drift / 5.6
    assert vel_b >= vel_a * (1 - 1e-6)
    assert pos_b < 0.5 * pos_a


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_reference_structure_is_found_in_at_least_8_of_10_seeds(process_map):
    # the target in the rates benchmark's setting (`benchmarks/drive_search.py rates`:
    # population 10 x 10 generations, default operators, seeds 0..9, 2 workers); measured 9/10
    # (seed 2 ends at {3,5,6,7,8}), 54 s median per search. The 1 % noise rate is benchmark-only.
    rec = reference_recording()
    truth = ["two_mass", "coulomb", "viscous", "stribeck"]
    found = [StructureSearch(10, 10, seed, map_batches=process_map).fit(rec).best_structure_
             for seed in range(10)]  # fmt: skip
    assert sum(f == truth for f in found) >= 8, found


def test_polish_moves_a_search_that_ended_one_step_off_to_the_truth(recording):
    # one generation of four ends at {one_mass, coulomb, viscous, gravity}: the truth (no
    # gravity) is one deletion away; the local search after the last generation finds it and
    # stops when no neighbour of the truth is fitter
    kwargs = dict(population=4, generations=1, seed=0, **SMALL)
    plain = StructureSearch(polish_rounds=0, **kwargs).fit(recording)
    assert plain.best_structure_ == ["one_mass", "coulomb", "viscous", "gravity"]
    assert plain.polish_.empty
    polished = StructureSearch(polish_rounds=3, **kwargs).fit(recording)
    assert polished.best_structure_ == ["one_mass", "coulomb", "viscous"]
    moves = polished.polish_[polished.polish_["chosen"]]
    assert moves["codes"].tolist() == ["1,5,6"] and moves["round"].tolist() == [0]
    last = polished.polish_[polished.polish_["round"] == polished.polish_["round"].max()]
    assert last["fitness"].max() < polished.best_fitness_  # no neighbour of the truth fitter
    assert polished.n_evaluations_ > plain.n_evaluations_


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"polish_rounds": -1}, "polish_rounds"),
        ({"breed_ahead": -1}, "breed_ahead"),
        ({"identification": {"jit_opt": "-O3"}}, "jit_opt"),
        ({"identification": {"jit_opt": "auto; rm -rf /"}}, "jit_opt"),
    ],
)
def test_settings_refuse_values_outside_their_range(bad, field):
    # a crafted optimisation level never reaches a compiler's command line
    with pytest.raises(InputError, match=field):
        if "identification" in bad:
            IdentificationSettings(**bad["identification"])
        else:
            GPSettings(**bad)

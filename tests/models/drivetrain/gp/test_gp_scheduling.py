"""Scheduling of the search's identifications: refinement in the screening call
(``refine_at_once``), offspring bred ahead (``breed_ahead``) on an asynchronous backend, and
that neither changes what the search finds on any backend or after a resume."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

from models.drivetrain.gp.evaluate import IndividualSpec, identify, refinement
from models.drivetrain.gp.search import StructureSearch, as_arrays
from models.drivetrain.gp.settings import GPSettings
from tests.models.drivetrain.gp.test_gp_search import SMALL, _Killed


def test_refining_in_the_screening_call_equals_the_two_call_route(recording):
    data = as_arrays(recording)
    ident = replace(SMALL["identification"], screen_nfev=2)  # screening stops far from truth
    settings = GPSettings(**{**SMALL, "identification": ident})
    spec = IndividualSpec(("one_mass", "coulomb", "viscous"),
                          (("J1", 0.015), ("M_C", 0.12), ("f_v", 0.017)))  # fmt: skip
    screened = identify(spec, data, settings)
    fine = identify(refinement(screened), data, settings)
    assert not screened.refined and fine.refined and fine.fitness > screened.fitness
    for threshold in (-np.inf, screened.fitness):  # reached (at equality too): refined at once
        at_once = identify(replace(spec, refine_above=threshold), data, settings)
        assert at_once.refined
        assert at_once.parameters == fine.parameters and at_once.fitness == fine.fitness
        assert at_once.nfev == screened.nfev + fine.nfev
    missed = identify(replace(spec, refine_above=np.nextafter(screened.fitness, np.inf)), data,
                      settings)  # fmt: skip
    assert not missed.refined and missed.parameters == screened.parameters


def test_new_structures_are_refined_at_once_when_they_reach_the_last_generations_second_best(
    recording,
):
    search = StructureSearch(population=6, generations=4, seed=3, polish_rounds=0,
                             **SMALL).fit(recording)  # fmt: skip
    pop = search.population_history_
    refined_at_once = below = 0
    for g in range(1, 4):
        last = pop[pop["generation"] == g - 1].drop_duplicates("codes")
        threshold = last["fitness"].sort_values(ascending=False).iloc[1]  # refine_top = 2
        new = pop[(pop["generation"] == g) & ~pop["codes"].isin(pop.loc[pop["generation"] < g,
                                                                          "codes"])]  # fmt: skip
        # not refined: the screened fitness missed the threshold; refined: it reached it, and
        # a refinement (from the screened point, same yardstick) never lowers the fitness
        assert (new.loc[~new["refined"], "fitness"] < threshold).all()
        assert (new.loc[new["refined"], "fitness"] >= threshold).all()
        refined_at_once += int(new["refined"].sum())
        below += int((~new["refined"]).sum())
    assert refined_at_once and below  # both branches taken in this search


def test_individuals_bred_ahead_join_the_generation_after_next(recording):
    # an asynchronous backend (threads); round g = the submissions between progress(g - 1)
    # and progress(g)
    submitted: list[tuple[int, str]] = []
    rounds = [0]
    kwargs = dict(population=5, generations=5, seed=3, polish_rounds=0, **SMALL)
    with ThreadPoolExecutor(max_workers=2) as pool:

        def submit(fn, batch):
            submitted.extend((rounds[0], ",".join(sp.structure)) for sp in batch)
            return pool.submit(fn, batch)

        def progress(g, n, best):
            rounds[0] = g + 1

        search = StructureSearch(submit_batch=submit, progress=progress, **kwargs).fit(recording)
    pop = search.population_history_
    assert (pop.groupby("generation").size() == 5).all()
    checked = 0
    for g in (2, 3, 4):  # bred after generation g - 2 (breed_ahead 1): index 1, after the elite
        ahead = pop.loc[(pop["generation"] == g) & (pop["index"] == 1), "names"].item()
        if ahead in set(pop.loc[pop["generation"] < g, "names"]):
            continue  # no new structure was left to breed (16 in this function set)
        # started in generation g - 1's round, after that generation's own individuals
        assert [names for r, names in submitted if r == g - 1][-1] == ahead
        checked += 1
    assert checked >= 2
    # the synchronous serial backend runs the same search (only without the overlap)
    plain = StructureSearch(**kwargs).fit(recording)
    assert plain.history_.equals(search.history_)
    timeless = ["wall_s"]  # the only column that depends on the machine
    assert plain.population_history_.drop(columns=timeless).equals(
        search.population_history_.drop(columns=timeless)
    )
    assert plain.best_parameters_ == search.best_parameters_
    assert plain.n_evaluations_ == search.n_evaluations_


def test_killed_asynchronous_search_resumes_to_the_same_result(recording, tmp_path):
    # killed while an individual bred ahead is still running: the resumed search starts it
    # again with the refinement threshold it was first started with, and ends where the
    # uninterrupted one does
    kwargs = dict(population=5, generations=6, seed=7, **SMALL)
    first: dict[str, float | None] = {}  # structure -> refine_above at its first start
    again: dict[str, float | None] = {}

    def kill_after_three(g, n, best):
        if g == 2:
            raise _Killed

    with ThreadPoolExecutor(max_workers=2) as pool:
        full = StructureSearch(submit_batch=functools.partial(_submit, pool, first),
                               **kwargs).fit(recording)  # fmt: skip
        with pytest.raises(_Killed):
            StructureSearch(checkpoint_dir=tmp_path, progress=kill_after_three,
                            submit_batch=functools.partial(_submit, pool, {}),
                            **kwargs).fit(recording)  # fmt: skip
        resumed = StructureSearch(checkpoint_dir=tmp_path,
                                  submit_batch=functools.partial(_submit, pool, again),
                                  **kwargs).fit(recording)  # fmt: skip
    assert resumed.resumed_from_ == 3
    assert resumed.history_.equals(full.history_)
    assert resumed.population_history_.drop(columns="wall_s").equals(
        full.population_history_.drop(columns="wall_s")
    )
    assert resumed.best_parameters_ == full.best_parameters_
    # started again after the resume: the one bred ahead by the last breeding before the kill
    # (its threshold is that of the generation it was first started in), then the new ones
    assert again and all(again[k] == first[k] for k in again)
    carried = resumed.population_history_.query("generation == 3 and index == 1")["names"].item()
    assert carried in again and first[carried] != resumed._refine_threshold(
        {r.names: r.fitness for r in full.population_history_.query("generation == 2").itertuples()}
    )


def _submit(pool, log, fn, batch):
    for spec in batch:
        if not spec.refine:
            log.setdefault(",".join(spec.structure), spec.refine_above)
    return pool.submit(fn, batch)


@pytest.mark.parametrize(
    "field, damage",
    [
        ("refine_above", lambda state: {k: "abc" for k in state["refine_above"]}),
        ("refine_above", lambda state: {k: float("nan") for k in state["refine_above"]}),
        ("ahead", lambda state: [{"nodes": "not a tree"}]),
        (
            "population",
            lambda state: [{"nodes": [{"kind": "rm -rf /", "parent": 0, "params": {}}]}],
        ),
        ("population_rows", lambda state: [{"generation": "x"}]),
    ],
)
def test_a_damaged_checkpoint_is_refused_by_name_and_left_as_it_is(
    recording, tmp_path, field, damage
):
    import json

    from methods.errors import InputError
    from models.drivetrain.gp.checkpoint import FILE

    kwargs = dict(population=5, generations=4, seed=7, polish_rounds=0, **SMALL)

    def kill_after_two(g, n, best):
        if g == 1:
            raise _Killed

    with pytest.raises(_Killed):
        StructureSearch(checkpoint_dir=tmp_path, progress=kill_after_two, **kwargs).fit(recording)
    path = tmp_path / FILE
    state = json.loads(path.read_text())
    assert state["ahead"] and state["refine_above"]  # killed with one bred ahead running
    state[field] = damage(state)
    text = json.dumps(state)
    path.write_text(text)
    with pytest.raises(InputError, match=rf"{FILE}: damaged checkpoint, field '{field}'"):
        StructureSearch(checkpoint_dir=tmp_path, **kwargs).fit(recording)
    assert path.read_text() == text


def test_more_bred_ahead_than_a_generation_has_room_for_is_capped(recording):
    # breed_ahead is capped at population - n_elite - 1: every generation keeps one offspring
    # bred for itself, and every population stays full
    search = StructureSearch(population=4, generations=4, seed=3, breed_ahead=100,
                             polish_rounds=0, **SMALL).fit(recording)  # fmt: skip
    sizes = search.population_history_.groupby("generation").size()
    assert sizes.tolist() == [4, 4, 4, 4]

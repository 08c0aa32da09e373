"""Identification, the picklable batch evaluator, determinism and checkpoint/resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from methods.gp.evaluate import IndividualSpec, evaluate_batch, identify
from methods.gp.search import StructureSearch, as_arrays
from methods.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.excitation import reference_recording

SMALL = dict(
    allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
    identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False),
)


@pytest.fixture(scope="module")
def recording():
    # short record of a simple truth keeps these tests fast (each simulation ~1 ms)
    df = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
    return df


def test_identify_recovers_truth_from_a_perturbed_start(recording):
    data = as_arrays(recording)
    spec = IndividualSpec(("one_mass", "coulomb", "viscous"),
                          (("J1", 0.015), ("M_C", 0.12), ("f_v", 0.017)))  # fmt: skip
    ev = identify(spec, data, GPSettings(**SMALL))
    # noise-free data and the true structure: the fit is exact up to solver tolerance
    assert ev.parameters == pytest.approx({"J1": 0.01, "M_C": 0.2, "f_v": 0.01}, rel=1e-4)
    # fitness = 1 / (RSS (1 + 2 d)), RSS floored at 1e-14 of the output's sum of squares
    floor = 1e-14 * np.sum((data.y - data.y.mean()) ** 2)
    assert ev.n_params == 3
    assert ev.fitness == pytest.approx(1 / (max(ev.rss, floor) * 7), rel=1e-9)


def test_evaluate_batch_is_picklable_and_pure(recording):
    import functools

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


def test_train_test_split_uses_the_tail_for_fitness(recording):
    data = as_arrays(recording)
    spec = IndividualSpec(("one_mass", "viscous"), (("J1", 0.01), ("f_v", 0.01)))
    ev = identify(spec, data, GPSettings(test_fraction=0.3, **SMALL))
    assert np.isfinite(ev.rss) and ev.rss != ev.rss_train

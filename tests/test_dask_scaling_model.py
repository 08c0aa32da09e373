"""The scaling model of benchmarks/dask_scaling.py: longest-first list scheduling per round,
rounds one after the other, the main process's time serial (oracles: hand-computed schedules
and the bounds every schedule obeys); the static split it is compared with (one batch per worker
by the dispatcher's cost estimate)."""

from __future__ import annotations

import pytest

from benchmarks.dask_scaling import makespan, modelled_wall, static_wall
from models.drivetrain.gp.evaluate import IndividualSpec


def test_longest_first_schedule_by_hand() -> None:
    # 3 -> w1, 3 -> w2, 2 -> w1 (5), 2 -> w2 (5), 2 -> w1 (7): LPT's 7 (the optimum is 6)
    assert makespan([2, 3, 2, 3, 2], 2) == 7
    assert makespan([2, 3, 2, 3, 2], 1) == 12
    assert makespan([4, 1, 1], 8) == 4  # more workers than work: the longest one


@pytest.mark.parametrize("workers", [1, 2, 3, 8, 32])
def test_every_schedule_lies_between_the_bounds(workers: int) -> None:
    durations = [0.3 * (i % 7) + 0.1 for i in range(23)]
    span = makespan(durations, workers)
    lower = max(max(durations), sum(durations) / workers)
    assert lower - 1e-12 <= span <= lower + max(durations)  # list scheduling's guarantee


def test_rounds_add_up_and_the_serial_part_stays() -> None:
    rounds = {0: [1.0, 1.0], 1: [2.0, 1.0, 1.0]}
    assert modelled_wall(rounds, 0.5, 1) == pytest.approx(6.5)
    assert modelled_wall(rounds, 0.5, 2) == pytest.approx(0.5 + 1.0 + 2.0)
    assert modelled_wall(rounds, 0.5, 100) == modelled_wall(rounds, 0.5, 3)  # 3 at most at once


def _spec(name: str, n_params: int) -> IndividualSpec:
    return IndividualSpec((name,), tuple((f"p{i}", 1.0) for i in range(n_params)))


def test_a_static_split_follows_the_cost_estimate_not_the_durations() -> None:
    # the estimate ((1 + n)^2) puts the 3-parameter job alone and both 1-parameter jobs
    # together: 2 + 2 = 4 s, where handing jobs out longest first as workers free up gives 3 s
    jobs = {0: [(_spec("a", 3), 1.0), (_spec("b", 1), 2.0), (_spec("c", 1), 2.0)]}
    rounds = {r: [d for _, d in js] for r, js in jobs.items()}
    assert static_wall(jobs, 0.5, 2) == pytest.approx(0.5 + 4.0)
    assert modelled_wall(rounds, 0.5, 2) == pytest.approx(0.5 + 3.0)
    assert static_wall(jobs, 0.5, 1) == modelled_wall(rounds, 0.5, 1)  # one worker: all serial

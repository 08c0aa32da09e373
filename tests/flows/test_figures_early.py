"""Figures drawn while the command works (`runtime.figures.draw_early`, issue 31): a figure
queued in a CLI process is drawn by a forked child at once, on the second core; the pixels are
the ones drawing here gives, every figure is drawn whatever the order of queueing and
finishing, a stuck child costs only time, and `GREYLAB_FIGURE_CHILD=0` keeps every figure
here."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from runtime import deferred, figures
from runtime.figures import FigureJob, Pixels, draw

two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")


def _builder(k: int, built_in: list[int] | None = None, pause: float = 0.0) -> Any:
    def build() -> Any:
        if built_in is not None:
            built_in.append(os.getpid())  # a child's list is its own copy: only ours is seen
        time.sleep(pause)
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(np.linspace(0, 1, 50) ** (k + 1), label=f"k={k}")
        ax.set_title(f"figure {k}")
        ax.legend()
        fig.tight_layout()
        return fig

    return build


@pytest.fixture
def queue() -> Iterator[dict[int, Any]]:
    """Deferral on, as in a CLI process; what each job logged, by number."""
    logged: dict[int, Any] = {}
    deferred.enable()
    try:
        yield logged
    finally:
        deferred.run_deferred()  # leaves no child behind, whatever the test did
        deferred.enable(False)


def _defer(k: int, logged: dict[int, Any], built_in: list[int], pause: float = 0.0) -> None:
    log = lambda drawn: logged.__setitem__(k, drawn)  # noqa: E731
    deferred.defer(FigureJob(_builder(k, built_in, pause), log), "figures")


@two_cores
def test_a_queued_figure_is_drawn_by_a_child_while_the_command_works(
    queue: dict[int, Any], tmp_path: Path
) -> None:
    built_here: list[int] = []
    _defer(0, queue, built_here, pause=0.3)
    niceness, parent = tmp_path / "nice", os.getpid()

    def probe() -> Any:  # a figure that tells the niceness of the process that builds it
        if os.getpid() != parent:
            niceness.write_text(str(os.nice(0)))
        return _builder(5)()

    deferred.defer(FigureJob(probe, lambda drawn: queue.__setitem__(5, drawn)), "figures")
    child = figures._early
    assert child is not None and child.pid != os.getpid()  # forked at once
    _work_until_done(child)
    assert child.status == 0
    _defer(1, queue, built_here)  # collects the first child, forks one for this figure
    assert figures._early is not None and figures._early is not child
    _work_until_done(figures._early)  # else this process takes figure 1 itself, as it should
    assert deferred.run_deferred() == []
    assert built_here == []  # neither figure was built in this process
    # an early child yields to the study on a busy machine (the probe was drawn by a child)
    assert isinstance(queue[5], Pixels)
    # (Linux caps niceness at 19: under `nice make test` the child is as nice as it can be)
    assert int(niceness.read_text()) == min(os.nice(0) + figures.EARLY_NICE, 19)
    for k in (0, 1):
        here = draw(_builder(k)())
        assert isinstance(queue[k], Pixels)
        np.testing.assert_array_equal(queue[k].rgba, here.rgba)


def _work_until_done(child: Any) -> None:
    deadline = time.monotonic() + 60
    while not child.done() and time.monotonic() < deadline:  # the command works meanwhile
        time.sleep(0.02)


@two_cores
def test_figures_queued_while_a_child_draws_are_all_drawn_after_the_answer(
    queue: dict[int, Any], tmp_path: Path
) -> None:
    built_here: list[int] = []
    taken = tmp_path / "taken"

    def slow_first() -> Any:
        taken.touch()
        return _builder(0, built_here, pause=0.5)()

    deferred.defer(FigureJob(slow_first, lambda drawn: queue.__setitem__(0, drawn)), "figures")
    for k in range(1, 6):  # the first child draws figure 0; 1-5 wait for the answer
        _defer(k, queue, built_here)
    deadline = time.monotonic() + 60
    while not taken.exists() and time.monotonic() < deadline:  # the child took figure 0
        time.sleep(0.02)
    assert deferred.run_deferred() == []
    assert sorted(queue) == list(range(6))
    assert all(isinstance(queue[k], Pixels) for k in range(6))
    assert 0 < len(built_here) < 6  # this process drew some of 1-5, a new child the rest
    for k in range(6):
        np.testing.assert_array_equal(queue[k].rgba, draw(_builder(k)()).rgba)


@two_cores
def test_a_stuck_early_child_is_killed_and_its_figure_drawn_when_its_job_runs(
    queue: dict[int, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    parent = os.getpid()
    taken = tmp_path / "taken"

    def stuck_in_child() -> Any:
        if os.getpid() != parent:
            taken.touch()
            time.sleep(600)  # e.g. a lock held by another thread at the fork
        return _builder(0)()

    monkeypatch.setattr(figures, "MIN_GRACE_S", 600.0)  # not the bound of an early child
    deferred.defer(FigureJob(stuck_in_child, lambda drawn: queue.__setitem__(0, drawn)))
    child = figures._early
    assert child is not None
    deadline = time.monotonic() + 60
    while not taken.exists() and time.monotonic() < deadline:  # the child took the job
        time.sleep(0.02)
    started = time.monotonic()
    assert deferred.run_deferred() == []
    # waited for about as long as drawing here takes (EARLY_GRACE_S: 1 s), not MIN_GRACE_S
    assert time.monotonic() - started < 10 * figures.EARLY_GRACE_S
    assert child.status == -1  # killed
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)  # and reaped
    assert not isinstance(queue[0], Pixels)  # built and logged here instead
    plt.close(queue[0])


def test_figure_child_off_keeps_every_figure_here(
    queue: dict[int, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(figures.CHILD_ENV, "0")
    built_here: list[int] = []
    for k in range(3):
        _defer(k, queue, built_here)
        assert figures._early is None
    assert deferred.run_deferred() == []
    assert built_here == [os.getpid()] * 3
    for k in range(3):
        plt.close(queue[k])

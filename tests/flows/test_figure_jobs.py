"""Deferred figures drawn on two processes (`runtime.figures`, issue 31): the same pixels as
drawing here, half of them drawn by a forked child, and any trouble with the child costs only
time (its figures are drawn here)."""

from __future__ import annotations

import io
import os
import time
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest

from runtime import deferred, figures
from runtime.figures import FigureJob, Pixels, draw, prerender
from tracking.memory import InMemoryTracker
from tracking.recorder import Run

two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")


def _builder(k: int, made_by: list[int] | None = None) -> Any:
    def build() -> Any:
        if made_by is not None:
            made_by.append(os.getpid())
        fig, ax = plt.subplots(figsize=(4, 3))
        x = np.linspace(0, 1, 200)
        ax.plot(x, np.sin((k + 1) * 6 * x), label=f"figure {k}")
        ax.set_title(f"figure {k}: µm, ±σ")
        ax.legend()
        fig.tight_layout()
        return fig

    return build


def _job(k: int, logged: dict[int, Any]) -> FigureJob:
    return FigureJob(_builder(k), lambda drawn: logged.__setitem__(k, drawn))


@two_cores
def test_prerendered_pixels_equal_drawing_here_and_the_child_drew_half() -> None:
    logged: dict[int, Any] = {}
    jobs = [_job(k, logged) for k in range(5)]
    pid = os.getpid()
    assert prerender(jobs) == 5
    for job in jobs:
        job()
    for k in range(5):
        here = draw(_builder(k)())
        assert isinstance(logged[k], Pixels)
        assert logged[k].dpi == here.dpi
        np.testing.assert_array_equal(logged[k].rgba, here.rgba)
    # who built what: the child took some (their builders ran there, not here); each build
    # lasts 1 s, so the child, free after the fork, takes a job while this process draws one
    made_by: list[int] = []

    def slow(k: int) -> Any:
        def build() -> Any:
            time.sleep(1.0)
            return _builder(k, made_by)()

        return build

    jobs = [FigureJob(slow(k), lambda drawn: None) for k in range(4)]
    assert prerender(jobs) == 4
    assert 1 <= len(made_by) <= 3 and set(made_by) == {pid}


@two_cores
def test_a_figure_that_fails_to_build_fails_when_its_job_runs_and_the_others_are_drawn() -> None:
    def broken() -> Any:
        raise ValueError("no data")

    logged: dict[int, Any] = {}
    jobs = [_job(0, logged), FigureJob(broken, lambda drawn: None), _job(2, logged)]
    assert prerender(jobs) == 2
    assert jobs[1].pixels is None
    with pytest.raises(ValueError, match="no data"):
        jobs[1]()


@two_cores
def test_a_stuck_child_is_killed_and_its_figures_are_drawn_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parent = os.getpid()

    def slow_in_child(k: int) -> Any:
        def build() -> Any:
            if os.getpid() != parent:
                time.sleep(600)  # a child that never finishes (e.g. a lock held at fork)
            return _builder(k)()

        return build

    monkeypatch.setattr(figures, "MIN_GRACE_S", 0.5)
    jobs = [FigureJob(slow_in_child(k), lambda drawn: None) for k in range(4)]
    started = time.monotonic()
    drawn = prerender(jobs)
    assert time.monotonic() - started < 60
    undrawn = [k for k, job in enumerate(jobs) if job.pixels is None]
    assert 1 <= drawn < 4 and len(undrawn) == 4 - drawn  # this process's share only ...
    logged: dict[int, Any] = {}
    for k, job in enumerate(jobs):
        job.log = lambda drawn, k=k: logged.__setitem__(k, drawn)
        job()  # ... and the child's draws when its job runs
    assert all(isinstance(logged[k], Pixels) != (k in undrawn) for k in range(4))
    for k in undrawn:
        plt.close(logged[k])


def test_a_run_in_the_cli_logs_prerendered_figures_as_the_pngs_savefig_gives() -> None:
    tracker = InMemoryTracker()
    run = Run(tracker, tracker.start_run("e", "r", study="test"))
    deferred.enable()
    try:
        for k in range(3):
            run.figure(_builder(k), f"figures/f{k}.png")
        run.figure(_builder(3), "figures/f3.svg")  # another format: never pixels
        assert deferred.pending() == 4
        assert deferred.run_deferred() == []
    finally:
        deferred.enable(False)
    artifacts = tracker.runs[run.id].artifacts
    for k in range(3):
        logged = mpimg.imread(io.BytesIO(artifacts[f"figures/f{k}.png"]), format="png")
        buffer = io.BytesIO()
        _builder(k)().savefig(buffer, format="png")
        expected = mpimg.imread(io.BytesIO(buffer.getvalue()), format="png")
        np.testing.assert_array_equal(logged, expected)
    assert "figures/f3.svg" in artifacts

"""Figures drawn after the answer, on two processes (issue 31).

A study's figures are deferred until the command has printed its answer (`runtime.deferred`);
building and drawing them is then most of the wait until the command exits (the press study:
8 figures, 0.8-2 s). `FigureJob` is such a figure: how to build it and how to log it. Before the
queue runs, `prerender` draws the figure jobs in two processes: a forked child and this process
take them one at a time from a shared queue, and the child hands its pixels back through a
temporary folder; the jobs then log `Pixels` (the tracker saves them without drawing again). The
pixels are the ones the figure would have given drawn here (the same code on a copy of the
same process).

The child only builds and draws (matplotlib and numpy, no tracking, no logging) and leaves with
`os._exit`, so nothing of the parent (its servers, exit handlers, open runs) runs twice. Any
trouble with the child (no `fork`, one core, a failure, not done within twice this process's
own drawing time and at least `MIN_GRACE_S`) costs only time: the jobs it did not hand back
draw here, as without it.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_GRACE_S = 10.0  # the least a child is waited for after this process drew its half


@dataclass(frozen=True)
class Pixels:
    """A figure drawn: ``rgba`` (height, width, 4) uint8 at ``dpi``."""

    rgba: Any
    dpi: float


def draw(figure: Any) -> Pixels:
    """Draw a matplotlib figure once and close it: its pixels."""
    import matplotlib.pyplot as plt
    import numpy as np

    try:
        figure.canvas.draw()
        return Pixels(np.asarray(figure.canvas.buffer_rgba()).copy(), float(figure.dpi))
    finally:
        plt.close(figure)


@dataclass
class FigureJob:
    """A deferred figure: ``build()`` makes the matplotlib figure, ``log(figure_or_pixels)``
    records it. Called, it logs its pixels when `prerender` drew them, else builds and logs."""

    build: Callable[[], Any]
    log: Callable[[Any], None]
    png: bool = True  # False: the tracker saves the figure itself (another format), never pixels
    pixels: Pixels | None = None

    def __call__(self) -> None:
        self.log(self.pixels if self.pixels is not None else self.build())

    def render(self) -> Pixels:
        return draw(self.build())


def prerender(jobs: Sequence[Any]) -> int:
    """Draw the `FigureJob`s among `jobs` on two processes (module docstring); the number
        drawn. Fewer than two figures, no `os.fork` or one core: nothing is done here (each job
        draws when it runs). A job whose drawing fails is left undrawn: it fails when it runs.

        The two processes share the jobs through a pipe that holds their numbers: each takes the
        next number when it is free (a one-byte read is atomic), so a process that drew a heavy
        figure takes fewer. Before the fork the heap is frozen (`gc.freeze`): the child's garbage
        collector then leaves the parent's objects alone instead of copying their pages (this
    process unfreezes them again unless they were frozen before, as in a warm child)."""
    figures = [j for j in jobs if isinstance(j, FigureJob) and j.png and j.pixels is None]
    figures = figures[:255]  # one byte a number; any more draw when they run
    if len(figures) < 2 or not hasattr(os, "fork") or _cores() < 2:
        return 0
    with tempfile.TemporaryDirectory(prefix="greylab-figures-") as folder:
        out = Path(folder) / "pixels.pickle"
        numbers, feed = os.pipe()
        os.write(feed, bytes(range(len(figures))))
        os.close(feed)  # empty pipe: end of the jobs for both processes
        frozen = gc.get_freeze_count()
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid != 0 and not frozen:  # here: collected as before (a warm child stays frozen)
            gc.unfreeze()
        if pid == 0:  # the child: draw, hand back, leave without running anything of the parent
            code = 1
            try:
                drawn = {i: _try(figures[i].render) for i in _taken(numbers)}
                part = out.with_suffix(".part")
                part.write_bytes(pickle.dumps(drawn, protocol=pickle.HIGHEST_PROTOCOL))
                part.rename(out)
                code = 0
            finally:
                os._exit(code)
        started = time.monotonic()
        try:
            for i in _taken(numbers):
                figures[i].pixels = _try(figures[i].render)
            if pid > 0:  # its share takes about as long as ours: a child far slower is stuck
                grace = max(MIN_GRACE_S, 2.0 * (time.monotonic() - started))
                for i, pixels in _collect(pid, out, time.monotonic() + grace).items():
                    if 0 <= i < len(figures):
                        figures[i].pixels = pixels
                pid = -1
        finally:
            os.close(numbers)
            if pid > 0:  # interrupted: the child goes too
                _end(pid)
    return sum(job.pixels is not None for job in figures)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _taken(numbers: int) -> Iterator[int]:
    """The job numbers this process takes from the shared pipe, one at a time, until empty."""
    while number := os.read(numbers, 1):
        yield number[0]


def _try(render: Callable[[], Pixels]) -> Pixels | None:
    try:
        return render()
    except Exception:  # the job builds again when it runs and reports its own failure
        return None


def _collect(pid: int, out: Path, deadline: float) -> dict[int, Pixels]:
    """The child's pixels; a child not done by `deadline` is killed (its jobs draw here)."""
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): its file tells
            done, status = pid, 0
        if done:
            break
        if time.monotonic() > deadline:
            _end(pid)
            return {}
        time.sleep(0.005)
    if status != 0 or not out.exists():
        return {}
    try:
        drawn = pickle.loads(out.read_bytes())  # written by our own child, in our own folder
    except Exception:
        return {}
    return {i: p for i, p in drawn.items() if isinstance(p, Pixels)}


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass

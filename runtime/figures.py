"""Figures drawn beside the work, on a second process (issue 31).

A study's figures are deferred until the command has printed its answer (`runtime.deferred`);
building and drawing them was then most of the wait until the command exits (the press study:
8 figures, 0.8-2 s). `FigureJob` is such a figure: how to build it and how to log it.

Two moments share the drawing with a forked child process:
- **while the command works** (`draw_early`, called as a figure is queued): when no child is
  drawing, a child is forked for the figures queued and not yet drawn, and draws them on the
  second core while this process goes on with the study (the data a figure is built from is
  final once it is queued). A child that is done is collected at the next figure queued.
- **after the answer** (`prerender`, before the queue runs): the figures left are drawn by this
  process and a child, one at a time from a shared queue; a child still drawing early figures is
  helped by this process once its own are done, then collected.
The jobs then log `Pixels` (the tracker saves them without drawing again). The pixels are the
ones the figure would have given drawn here (the same code on a copy of the same process).

A child only builds and draws (matplotlib and numpy, no tracking, no logging) and leaves with
`os._exit`, so nothing of the parent (its servers, exit handlers, open runs) runs twice. Any
trouble with a child (no `fork`, one core, a failure, not done within twice this process's
own drawing time and at least `MIN_GRACE_S`; an early child, which runs at `EARLY_NICE` and
draws at most one figure after the answer: twice this process's time per figure, at least
`EARLY_GRACE_S`) costs only time: the jobs it did not hand back draw here, as without it. The fork happens while other threads of this process may run (Prefect's);
a child needs none of their locks (the logging and import locks are reset by Python at fork).
`GREYLAB_FIGURE_CHILD=0` turns the children off.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_GRACE_S = 10.0  # the least a child is waited for after this process drew its share
#: the least an early child is waited for after the answer (it draws at most one figure then:
#: a child starved on a busy machine is not waited for longer than drawing here would take)
EARLY_GRACE_S = 1.0
MAX_JOBS = 255  # job numbers travel as one byte each
#: an early child's priority below this process: on a busy machine the study goes first (the
#: figures it has not drawn by the answer are taken over by this process), on an idle core the
#: child runs as fast as without
EARLY_NICE = 10
#: ``0`` (or off, false, no): every figure is drawn by the process that logs it, no child
CHILD_ENV = "GREYLAB_FIGURE_CHILD"


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
    records it. Called, it logs its pixels when a process drew them, else builds and logs."""

    build: Callable[[], Any]
    log: Callable[[Any], None]
    png: bool = True  # False: the tracker saves the figure itself (another format), never pixels
    pixels: Pixels | None = None
    taken: bool = field(default=False, repr=False)  # handed to a child (drawn or not)

    def __call__(self) -> None:
        self.log(self.pixels if self.pixels is not None else self.build())

    def render(self) -> Pixels:
        return draw(self.build())


@dataclass
class _Child:
    """A forked child drawing `figures`, taking their numbers from the pipe `numbers`."""

    pid: int
    figures: list[FigureJob]
    numbers: int  # this process's read end: it takes the child's jobs too when it helps
    folder: tempfile.TemporaryDirectory
    status: int | None = None  # the exit status once reaped

    @property
    def out(self) -> Path:
        return Path(self.folder.name) / "pixels.pickle"

    def done(self) -> bool:
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): its file tells
                pid, status = self.pid, 0 if self.out.exists() else 1
            if pid:
                self.status = status
        return self.status is not None

    def help(self) -> None:
        """Draw here the child's jobs it has not taken yet."""
        for i in _taken(self.numbers):
            self.figures[i].pixels = _try(self.figures[i].render)

    def collect(self, deadline: float) -> None:
        """Wait for the child until `deadline` (then kill it) and keep the pixels it drew."""
        try:
            while not self.done():
                if time.monotonic() > deadline:
                    _end(self.pid)
                    self.status = -1
                    break
                time.sleep(0.005)
            if self.status == 0 and self.out.exists():
                try:
                    drawn = pickle.loads(self.out.read_bytes())  # our own child, our own folder
                except Exception:
                    drawn = {}
                for i, pixels in drawn.items():
                    if isinstance(pixels, Pixels) and 0 <= i < len(self.figures):
                        self.figures[i].pixels = pixels
        finally:
            self.close()

    def close(self) -> None:
        if self.status is None:
            _end(self.pid)
            self.status = -1
        try:
            os.close(self.numbers)
        except OSError:
            pass
        self.folder.cleanup()


_lock = threading.Lock()
_early: _Child | None = None  # the child drawing figures while the command works


def draw_early(jobs: Sequence[Any]) -> None:
    """Start drawing the queued figure jobs no process has taken, in a forked child, unless a
    child is still drawing (module docstring). Only a speed-up: never raises."""
    global _early
    if not _can_fork() or not _lock.acquire(blocking=False):
        return  # another thread is starting or collecting one: its figures wait for the next
    try:
        if _early is not None and _early.done():
            _early.collect(time.monotonic())
            _early = None
        figures = _undrawn(jobs)
        if _early is None and figures:
            _early = _fork(figures, nice=EARLY_NICE)
            if _early is not None and not _atexit_registered:
                _register_atexit()
    except Exception:
        pass
    finally:
        _lock.release()


_atexit_registered = False


def _register_atexit() -> None:
    """At exit, an early child not collected (the command failed before its deferred work)
    is ended and its folder removed."""
    global _atexit_registered
    import atexit

    def discard() -> None:
        global _early
        with _lock:
            early, _early = _early, None
        if early is not None:
            early.close()

    atexit.register(discard)
    _atexit_registered = True


def prerender(jobs: Sequence[Any]) -> int:
    """Draw the `FigureJob`s among `jobs` with a child process (module docstring); the number
    drawn. A child drawing early figures is helped and collected; the figures left are drawn
    by this process and a new child. Fewer than two figures left, no `os.fork` or one core:
    those draw when their jobs run. A job whose drawing fails is left undrawn: it fails when it
    runs."""
    global _early
    pngs = [j for j in jobs if isinstance(j, FigureJob) and j.png]
    with _lock:
        early, _early = _early, None
    child = None
    started = time.monotonic()
    try:
        figures = _undrawn(pngs)
        child = _fork(figures) if len(figures) >= 2 and _can_fork() else None
        for each in (child, early):  # their queues are shared: this process takes jobs too
            if each is not None:
                each.help()
        took = time.monotonic() - started
        if early is not None:  # it draws at most the one figure it took last, at low priority
            mine = [*(child.figures if child else ()), *early.figures]  # no child's pixels yet
            here = sum(j.pixels is not None for j in mine)
            early.collect(time.monotonic() + max(EARLY_GRACE_S, 2.0 * took / max(here, 1)))
        if child is not None:  # its share takes about as long as ours: far slower is stuck
            child.collect(time.monotonic() + max(MIN_GRACE_S, 2.0 * took))
    finally:
        for each in (early, child):
            if each is not None and each.status is None:
                each.close()  # interrupted: the child goes too
    return sum(job.pixels is not None for job in pngs)


def _undrawn(jobs: Sequence[Any]) -> list[FigureJob]:
    figures = [j for j in jobs if isinstance(j, FigureJob) and j.png and j.pixels is None]
    return [j for j in figures if not j.taken][:MAX_JOBS]  # any more draw when they run


def _fork(figures: list[FigureJob], nice: int = 0) -> _Child | None:
    """A child drawing `figures` (taking their numbers one at a time from a pipe), at `nice`
    below this process's priority, or None."""
    folder = tempfile.TemporaryDirectory(prefix="greylab-figures-")
    numbers, feed = os.pipe()
    os.write(feed, bytes(range(len(figures))))
    os.close(feed)  # an empty pipe ends the jobs for every process that reads it
    # Frozen (gc.freeze), the heap is left alone by the child's garbage collector instead of
    # copied page by page; this process unfreezes it again unless it was frozen before (a warm
    # child stays frozen).
    frozen = gc.get_freeze_count()
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:  # the child: draw, hand back, leave without running anything of the parent
        code = 1
        try:
            if nice:
                os.nice(nice)
            drawn = {i: _try(figures[i].render) for i in _taken(numbers)}
            out = Path(folder.name) / "pixels.pickle"
            part = out.with_suffix(".part")
            part.write_bytes(pickle.dumps(drawn, protocol=pickle.HIGHEST_PROTOCOL))
            part.rename(out)
            code = 0
        finally:
            os._exit(code)
    if not frozen:
        gc.unfreeze()
    if pid < 0:
        os.close(numbers)
        folder.cleanup()
        return None
    for job in figures:
        job.taken = True
    return _Child(pid, figures, numbers, folder)


def _can_fork() -> bool:
    off = os.environ.get(CHILD_ENV, "").strip().lower() in {"0", "off", "false", "no"}
    return not off and hasattr(os, "fork") and _cores() >= 2


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _taken(numbers: int) -> Iterator[int]:
    """The job numbers this process takes from a shared pipe, one at a time, until empty."""
    while number := os.read(numbers, 1):
        yield number[0]


def _try(render: Callable[[], Pixels]) -> Pixels | None:
    try:
        return render()
    except Exception:  # the job builds again when it runs and reports its own failure
        return None


def _end(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass

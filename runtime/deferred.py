"""Work that may wait until the command has printed its answer (issue 31).

A CLI study spends most of its wall time in tracking (MLflow figures, model registration) that
the answer does not need. `defer(job)` queues such work when the command's process asked for
it (`enable()`, called by `flows.cli.main`); `run_deferred()` runs the queue after the answer is
printed. A failing job cannot lose the answer: it is reported as one warning line on stderr and
the command's exit code stays the answer's. Without `enable()` (in-process callers, tests,
deployed flow runs) `defer` runs the job at once, as before, and its exceptions propagate.

The hook a recorder needs is one line: ``defer(lambda: self.figure(...))`` in place of
``self.figure(...)``; figures are deferred as `runtime.figures.FigureJob`s, which a second
process starts drawing as they are queued (`runtime.figures`). A deferred job must only need
what it captured (an MLflow run id, arrays): the run it logs to may be finished by then (MLflow
accepts artifacts for finished runs).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_queue: list[tuple[str, Callable[[], Any]]] = []
_enabled = False


def enable(on: bool = True) -> None:
    """Queue deferred work in this process (the CLI's own process) instead of running it."""
    global _enabled
    with _lock:
        _enabled = on


def enabled() -> bool:
    return _enabled


def defer(job: Callable[[], Any], what: str = "tracking") -> None:
    """Run `job` after the answer is printed (queued), or now when deferral is off."""
    with _lock:
        queued = [j for _, j in (*_queue, (what, job))] if _enabled else None
        if queued is not None:
            _queue.append((what, job))
    if queued is None:
        job()
        return
    from runtime.figures import FigureJob, draw_early

    if isinstance(job, FigureJob):
        draw_early(queued)  # drawn by a second process while the command goes on


def pending() -> int:
    with _lock:
        return len(_queue)


def run_deferred(report: Callable[[str], Any] | None = None) -> list[str]:
    """Run the queued jobs in order (jobs queued meanwhile too); failures are reported through
    `report` (default: a warning line on stderr) and returned, never raised."""
    failures: list[str] = []
    with _lock:
        queued = [job for _, job in _queue]
    if queued:
        from runtime.figures import prerender

        try:
            prerender(queued)  # the figures left drawn on two processes first (runtime.figures)
        except Exception:  # only a speed-up: each job then draws when it runs
            pass
    while True:
        with _lock:
            if not _queue:
                return failures
            what, job = _queue.pop(0)
        started = time.perf_counter()
        try:
            job()
        except Exception as exc:  # the answer is out: a failure here is a warning
            text = (f"greylab: warning: {what} after the answer failed ({type(exc).__name__}: "
                    f"{str(exc)[:500]}) after {time.perf_counter() - started:.1f} s; the answer "
                    "above stands")  # fmt: skip
            failures.append(text)
            (report or _to_stderr)(text)


def _to_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()

"""Running a search's identifications on a backend, synchronous or asynchronous.

Two kinds of backend, both taking the picklable batch evaluator ``fn(batch) -> evaluations``:

- ``map_batches(fn, batches) -> results`` (synchronous; ``serial_map`` by default): every job
  of a call is finished when it returns.
- ``submit_batch(fn, batch) -> future`` (asynchronous; ``future.result()`` waits, as
  ``concurrent.futures`` and Prefect futures do): jobs the search does not need yet
  (``Dispatcher.run``'s ``ahead``) keep the workers busy while the search breeds the next
  generation.

Results never depend on the backend or on timing, only when the work happens does: an
evaluation enters the cache when the search asks for it (``run`` or ``wait``), never when it
happens to finish (an ``ahead`` job finished by ``map_batches`` waits for ``wait`` too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from models.drivetrain.gp.evaluate import Evaluation, IndividualSpec

MapBatches = Callable[[Callable, list], list]
SubmitBatch = Callable[[Callable, list], Any]
Job = tuple[str, IndividualSpec]  # (cache key, spec)


def serial_map(fn: Callable, batches: list) -> list:
    """The default ``map_batches``: evaluate batches one after another in this process."""
    return [fn(b) for b in batches]


def balanced_batches(todo: list[IndividualSpec], n_batches: int) -> list[list[IndividualSpec]]:
    """Split ``todo`` into at most ``n_batches`` non-empty batches of similar cost (longest
    processing time first, cost ~ number of parameters squared; deterministic)."""
    n_batches = max(1, min(n_batches, len(todo)))
    batches: list[list[IndividualSpec]] = [[] for _ in range(n_batches)]
    loads = [0.0] * n_batches
    for spec in sorted(todo, key=lambda sp: (-len(sp.start), sp.key())):
        i = loads.index(min(loads))
        batches[i].append(spec)
        loads[i] += (1 + len(spec.start)) ** 2
    return batches


class Dispatcher:
    """Identification jobs ``(cache key, spec)`` of one search; evaluations go into ``cache``.

    ``n_batches``: the jobs a ``run`` must finish are split into at most this many balanced
    batches; each ``ahead`` job is a batch of its own, after them. ``n_identifications``
    counts identifications (a screening refined in the same call counts twice), ``timed_out``
    lists the evaluations that stopped at their time limit (``Evaluation.timed_out``).

    A search passes its population (``batch_size`` 1): one job per batch, submitted longest
    first, so a worker that frees up takes the next one. Fewer, larger batches (one per worker
    and round) save task round trips but split a round by the cost estimate instead of by the
    real durations: on the reference search's measured durations that takes the modelled
    1 -> 2 worker speed-up from 1.97x to 1.63-1.71x even with 20 ms per task round trip
    (``benchmarks/dask_scaling.py`` prints both)."""

    def __init__(
        self,
        fn: Callable[[list[IndividualSpec]], list[Evaluation]],
        cache: dict[str, Evaluation],
        n_batches: int,
        *,
        map_batches: MapBatches | None = None,
        submit_batch: SubmitBatch | None = None,
    ) -> None:
        self.fn, self.cache, self.n_batches = fn, cache, n_batches
        self.map_batches, self.submit_batch = map_batches, submit_batch
        self.pending: dict[str, tuple[Any, IndividualSpec]] = {}
        self.n_identifications = 0
        self.timed_out: list[Evaluation] = []

    def run(self, jobs: Sequence[Job], ahead: Sequence[Job] = ()) -> None:
        """Finish ``jobs``; start ``ahead`` (with ``map_batches``: finish them in the same
        call; with ``submit_batch``: leave them running until ``wait`` asks for them)."""
        keys = {sp.key(): k for k, sp in [*jobs, *ahead]}
        todo = sorted((sp for _, sp in jobs), key=lambda sp: sp.key())
        batches = balanced_batches(todo, self.n_batches) if todo else []
        later = [[sp] for _, sp in ahead]
        if self.submit_batch is None:
            if batches or later:
                results = (self.map_batches or serial_map)(self.fn, batches + later)
                for batch, evals in zip(batches, results):
                    self._store(keys, batch, evals)
                for (key, spec), evals in zip(ahead, results[len(batches) :]):
                    self.pending[key] = (_Done(evals), spec)  # into the cache when asked for
            return
        futures = [self.submit_batch(self.fn, b) for b in batches]
        for (key, spec), batch in zip(ahead, later):
            self.pending[key] = (self.submit_batch(self.fn, batch), spec)
        for batch, future in zip(batches, futures):
            self._store(keys, batch, future.result())

    def wait(self, keys: Iterable[str]) -> None:
        """Bring the evaluations of the pending jobs among ``keys`` into the cache."""
        for key in keys:
            if key in self.pending:
                future, spec = self.pending.pop(key)
                self._store({spec.key(): key}, [spec], future.result())

    def _store(self, keys: dict[str, str], batch: list[IndividualSpec], evals: list) -> None:
        for spec, ev in zip(batch, evals):
            self.cache[keys[spec.key()]] = ev
            self.n_identifications += 1 + (spec.refine_above is not None and ev.refined)
            self.timed_out += [ev] if ev.timed_out else []


class _Done:
    """A finished job's evaluations behind the future interface."""

    def __init__(self, evals: list[Evaluation]) -> None:
        self.evals = evals

    def result(self) -> list[Evaluation]:
        return self.evals

"""Drive-train structure search on a real Dask cluster, and what more workers would give.

    python benchmarks/dask_scaling.py [--seed 0] [--repeats 1]

The paper's reference search (10 x 10, seed 0, cold compile cache, as ``drive_search.py
speed``) three ways: batches in this process (the serial baseline, the same answer as the thread
runner: the search is the same on every backend), on a ``distributed.LocalCluster`` of 1 and of
2 worker processes (scheduler and workers on 127.0.0.1, started and closed here). Printed: the
answer of each (must be the same), the wall times, the 1 -> 2 worker speed-up (target >= 1.8x)
and a model of the speed-up on 8, 32 and 128 workers.

The workers are started as a lab's cluster would be, with the identification code preloaded
(``preload``, as ``dask worker --preload models.drivetrain.gp.recording``): a worker process is
spawned, not forked, and importing greylab, CasADi and SciPy takes it 1-2.5 s, which before was
paid inside the search at the first task (the process pool of ``drive_search.py speed`` forks
and never pays it). The cluster's start-up, imports included, is timed and printed on its own;
the search's wall time starts when the workers are up. The compile cache stays cold (the JIT
compilations are the search's own work).

The model (assumptions, stated): the search is a sequence of rounds (a generation, or a round of
the local search after the last generation), each a set of identifications whose durations are
those measured on the 1-worker cluster (``Evaluation.wall_s``, grouped by the round in which the
search waited for them). A round cannot start before the previous one ended (the generation
barrier: breeding needs the fitnesses; the one offspring bred ahead per breeding is ignored, a
conservative choice); within a round the identifications go to the least-loaded worker, longest
first (LPT), with no cost of moving work (a batch's pickling is inside the measured durations).
The main process's own time (breeding, bookkeeping, start-up) is the 1-worker wall minus the sum
of the identifications and stays serial. The model is checked against the measured 2-worker
wall; its prediction for many workers is bounded by the longest identification per round: with
a population of 10 at most 10 identifications run at once, so more workers than that add
nothing (a larger population would).

The alternative the dispatcher does not take is modelled from the same durations: one batch per
worker and round (``dispatch.balanced_batches`` on the dispatcher's cost estimate, fewer task
round trips) against one job per batch handed out longest-first as workers free up (what the
dispatcher does); the printed figures show what a static split loses at the generation barrier.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from benchmarks.drive_search import recording, settings
from models.drivetrain.gp import GPSettings, StructureSearch
from models.drivetrain.gp.dispatch import balanced_batches
from models.drivetrain.gp.recording import as_arrays

WORKERS_MODELLED = (1, 2, 8, 32, 128)
PRELOAD = "models.drivetrain.gp.recording"  # the workers' identification code (and evaluate)


class RoundMap:
    """``submit_batch`` on ``submit`` (a Dask client's, or in-process) that records each
    identification's duration under the round (generation or local-search round) in which the
    search waited for it; ``jobs`` the same with each job's spec (for the static split)."""

    def __init__(self, submit) -> None:
        self.submit_fn = submit
        self.round = 0
        self.rounds: dict[int, list[float]] = {}
        self.jobs: dict[int, list[tuple]] = {}

    def submit(self, fn, batch):
        future = self.submit_fn(fn, batch)

        def result():
            evals = future.result()
            self.rounds.setdefault(self.round, []).extend(ev.wall_s for ev in evals)
            self.jobs.setdefault(self.round, []).extend(zip(batch, (ev.wall_s for ev in evals)))
            return evals

        return SimpleNamespace(result=result)

    def progress(self, g: int, n: int, best) -> None:
        self.round += 1


def search(gp: GPSettings, seed: int, rec, submit) -> tuple[StructureSearch, float, RoundMap]:
    """One whole search with a cold compile cache on ``submit``; (search, wall, rounds)."""
    rounds = RoundMap(submit)
    with tempfile.TemporaryDirectory(prefix="greylab-jit-") as tmp:
        previous = os.environ.get("GREYLAB_JIT_CACHE")
        os.environ["GREYLAB_JIT_CACHE"] = tmp  # inherited by workers started after this
        try:
            t0 = time.perf_counter()
            found = StructureSearch(gp.population, gp.generations, seed, gp.test_fraction,
                                    settings=gp, submit_batch=rounds.submit,
                                    progress=rounds.progress).fit(rec)  # fmt: skip
            wall = time.perf_counter() - t0
        finally:
            os.environ.pop("GREYLAB_JIT_CACHE")
            if previous is not None:
                os.environ["GREYLAB_JIT_CACHE"] = previous
    return found, wall, rounds


def in_process(fn, batch):
    evals = fn(batch)
    return SimpleNamespace(result=lambda: evals)


def on_dask(gp: GPSettings, seed: int, rec, workers: int):
    """The search on a fresh LocalCluster of ``workers`` processes (one thread each, the
    identification code preloaded): (search, wall of the search, rounds, start-up wall of the
    cluster with the workers' imports)."""
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory(prefix="greylab-jit-") as tmp:
        os.environ["GREYLAB_JIT_CACHE"] = tmp  # the workers inherit it when they start
        try:
            t_start = time.perf_counter()
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              host="127.0.0.1", dashboard_address=None, preload=[PRELOAD],
                              silence_logs=logging.CRITICAL) as cluster, \
                    Client(cluster) as client:  # fmt: skip
                client.wait_for_workers(workers)
                t0 = time.perf_counter()
                found, _, rounds = search(gp, seed, rec,
                                          lambda fn, batch: client.submit(fn, batch, pure=False))  # fmt: skip
                return found, time.perf_counter() - t0, rounds, t0 - t_start
        finally:
            os.environ.pop("GREYLAB_JIT_CACHE", None)


def makespan(durations: list[float], workers: int) -> float:
    """Longest-processing-time-first list scheduling of ``durations`` on ``workers``."""
    loads = [0.0] * min(workers, max(1, len(durations)))
    heapq.heapify(loads)
    for d in sorted(durations, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + d)
    return max(loads)


def modelled_wall(rounds: dict[int, list[float]], serial_s: float, workers: int) -> float:
    return serial_s + sum(makespan(d, workers) for d in rounds.values())


def static_wall(jobs: dict[int, list[tuple]], serial_s: float, workers: int) -> float:
    """The model's wall if each round were split into one batch per worker by the dispatcher's
    cost estimate (``balanced_batches``), each batch's duration the sum of its jobs'."""
    total = serial_s
    for round_jobs in jobs.values():
        wall = {id(spec): d for spec, d in round_jobs}
        batches = balanced_batches([spec for spec, _ in round_jobs], workers)
        total += makespan([sum(wall[id(sp)] for sp in b) for b in batches], workers)
    return total


def measure(args, bench: Bench) -> None:
    rec = recording(0.0, args.seed)
    as_arrays(rec)  # the schema's first validation imports modules: not in the time
    run_args = SimpleNamespace(population=10, generations=10, preset="reference", paper=False,
                               prefilter_hz=GPSettings().identification.prefilter_hz,
                               screen_fraction=GPSettings().identification.screen_fraction,
                               polish_rounds=GPSettings().polish_rounds)  # fmt: skip
    gp = settings(run_args)
    local, local_s, _ = search(gp, args.seed, rec, in_process)
    one, one_s, recorded, one_up = on_dask(gp, args.seed, rec, 1)
    rounds = recorded.rounds
    two, two_s, _, two_up = on_dask(gp, args.seed, rec, 2)
    answers = {(tuple(s.best_codes_), round(s.best_fitness_, 9)) for s in (local, one, two)}
    same = len(answers) == 1
    print(
        f"in-process {local_s:.1f} s {local.best_codes_}; Dask 1 worker {one_s:.1f} s "
        f"{one.best_codes_}; 2 workers {two_s:.1f} s {two.best_codes_}; same answer: {same}; "
        f"cluster start-up (workers' imports, not in the walls) {one_up:.1f} s / {two_up:.1f} s"
    )
    work = sum(sum(d) for d in rounds.values())
    serial_s = max(0.0, one_s - work)
    model = {w: modelled_wall(rounds, serial_s, w) for w in WORKERS_MODELLED}
    static2 = static_wall(recorded.jobs, serial_s, 2)
    print(
        f"{len(rounds)} rounds, {sum(len(d) for d in rounds.values())} identifications, "
        f"{work:.1f} s of work, {serial_s:.1f} s serial; modelled wall "
        + ", ".join(f"{w}: {t:.1f} s" for w, t in model.items())
        + f"; 2 workers with one batch per worker and round: {static2:.1f} s "
        f"({model[1] / static2:.2f}x instead of {model[1] / model[2]:.2f}x)"
    )
    bench.add("same_answer", "yes" if same else f"no: {sorted(answers)}",
              "drive search (reference 10 × 10, seed 0): in-process, Dask 1 and 2 workers give "
              "the same structure and fitness")  # fmt: skip
    bench.add("dask1_s", one_s, "same on a local Dask cluster, 1 worker: wall", unit="s",
              fmt=".1f")  # fmt: skip
    bench.add("dask2_s", two_s, "same, 2 workers: wall", unit="s", fmt=".1f")
    bench.add("startup_s", f"{one_up:.1f} s / {two_up:.1f} s", "cluster start-up, 1 / 2 workers "
              "(processes spawned, identification code preloaded; not in the walls)")  # fmt: skip
    bench.add("speedup", one_s / two_s, "speed-up 1 → 2 Dask workers (same run)", unit="×",
              fmt=".2f", target=(">=", 1.8), short="drive search Dask 1 → 2 workers")  # fmt: skip
    bench.add("model_error", model[2] / two_s - 1, "scaling model's error on the measured "
              "2-worker wall (modelled / measured - 1)", fmt="+.2f")  # fmt: skip
    bench.add("model_static2", model[1] / static2, "modelled speed-up on 2 workers if each "
              "round were one batch per worker (the dispatcher's cost estimate) instead of one "
              "job per batch", unit="×", fmt=".2f")  # fmt: skip
    for w in WORKERS_MODELLED[2:]:
        bench.add(f"model_{w}", model[1] / model[w], f"modelled speed-up on {w} workers "
                  "(population 10: at most 10 identifications at once)", unit="×",
                  fmt=".2f")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    bench = Bench("dask_scaling", "drive", args.repeats, args.json)
    for _ in bench.runs():
        measure(args, bench)
    bench.finish()


if __name__ == "__main__":
    main()

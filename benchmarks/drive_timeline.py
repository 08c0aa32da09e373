"""Drive-train structure search on worker processes: where the workers wait.

    python benchmarks/drive_timeline.py [--seed 0 --workers 2] [--refine-at-once off]
                                        [--breed-ahead 0] [--repeats 3]

One whole search (the paper's reference, 10 x 10, cold compile cache, like
``drive_search.py speed``) on a process pool whose batches are timed inside the workers. Per
worker: its batches' wall time, the identifications' own time inside them, and the time it has
no batch - before its first, between batches (a generation's end, a second round trip, the
search breeding) and after its last. ``--refine-at-once off --breed-ahead 0`` is the scheduling
before issue 13's last two changes (a refinement round after every generation's screening, every
offspring in the generation it was bred for): the same search, run both ways, shows what each
change saves. Figures are worker-seconds summed over the workers unless named per worker.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from benchmarks.drive_search import recording, run, settings
from models.drivetrain.gp import GPSettings
from models.drivetrain.gp.recording import as_arrays


def timed(fn, batch):
    """``fn(batch)`` in a worker, with (pid, start, end, identifications' own time)."""
    t0 = time.time()
    evals = fn(batch)
    return (os.getpid(), t0, time.time(), sum(ev.wall_s for ev in evals)), evals


class TimedPool:
    """``submit_batch`` on a fresh process pool (as ``drive_search.ProcessMap``) that keeps
    every batch's worker-side timing in ``batches`` and the identifications' work in
    ``busy_s``."""

    def __init__(self, workers: int) -> None:
        self.pool = ProcessPoolExecutor(max_workers=workers)
        self.batches: list[tuple[int, float, float, float]] = []
        self.busy_s = 0.0

    def submit(self, fn, batch):
        future = self.pool.submit(functools.partial(timed, fn), batch)

        def result():
            info, evals = future.result()
            self.batches.append(info)
            self.busy_s += info[3]
            return evals

        return SimpleNamespace(result=result)

    def close(self) -> None:
        self.pool.shutdown()


def timeline(pool: TimedPool, t_start: float, t_end: float) -> dict[str, float]:
    """Worker-seconds without a batch (before the first, between, after the last) and inside
    batches but outside the identifications."""
    out = dict.fromkeys(("before", "between", "after", "overhead"), 0.0)
    for pid in {b[0] for b in pool.batches}:
        mine = sorted(b[1:] for b in pool.batches if b[0] == pid)
        out["before"] += mine[0][0] - t_start
        out["after"] += t_end - mine[-1][1]
        out["between"] += sum(mine[i + 1][0] - mine[i][1] for i in range(len(mine) - 1))
        out["overhead"] += sum(end - start - own for start, end, own in mine)
    return out


def measure(args, bench: Bench) -> None:
    rec = recording(0.0, args.seed)
    as_arrays(rec)  # the schema's first validation imports modules: not in the time
    gp = replace(settings(args), refine_at_once=args.refine_at_once == "on",
                 breed_ahead=args.breed_ahead)  # fmt: skip
    pool = TimedPool(args.workers)
    t_start = time.time()
    search, wall = run(args, args.seed, args.workers, rec, gp=gp, pmap=pool)
    parts = timeline(pool, t_start, t_start + wall)
    uncovered = wall - pool.busy_s / args.workers
    print(f"{args.workers} workers: {wall:.2f} s, best {search.best_codes_}, "
          f"{search.n_evaluations_} identifications; not covered by their work {uncovered:.2f} s; "
          + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))  # fmt: skip
    what = (f"reference 10 × 10 search, seed {args.seed}, {args.workers} workers, refine at once "
            f"{args.refine_at_once}, breed ahead {args.breed_ahead}")  # fmt: skip
    bench.add("wall_s", wall, f"{what}: wall", unit="s", fmt=".2f")
    bench.add("uncovered_s", uncovered, f"{what}: wall minus the identifications' work / "
              "workers", unit="s", fmt=".2f")  # fmt: skip
    bench.add("between_s", parts["between"], f"{what}: worker-seconds between batches "
              "(generation ends, refinement rounds, breeding)", unit="s", fmt=".3f")  # fmt: skip
    bench.add("edges_s", parts["before"] + parts["after"], f"{what}: worker-seconds before the "
              "first and after the last batch", unit="s", fmt=".3f")  # fmt: skip
    bench.add("overhead_s", parts["overhead"] / args.workers, f"{what}: per worker, inside "
              "batches outside the identifications (pickling, BLAS thread limit)", unit="s",
              fmt=".3f")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--refine-at-once", choices=["on", "off"], default="on")
    parser.add_argument("--breed-ahead", type=int, default=GPSettings().breed_ahead)
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    # the search drive_search.py speed runs: reference preset, defaults, cold compile cache
    args.population = args.generations = 10
    args.noise_percent, args.paper, args.preset, args.jit_cache = 0.0, False, "reference", "cold"
    defaults = GPSettings()
    args.prefilter_hz = defaults.identification.prefilter_hz
    args.screen_fraction = defaults.identification.screen_fraction
    args.polish_rounds = defaults.polish_rounds
    name = f"drive_timeline-{args.refine_at_once}-{args.breed_ahead}"
    bench = Bench(name, "drive", args.repeats, args.json)
    for _ in bench.runs():
        measure(args, bench)
    bench.finish()


if __name__ == "__main__":
    main()

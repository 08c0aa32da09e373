"""Drive-train structure search: success rates over seeds, wall time, parallel speed-up, EMPS.

    python benchmarks/drive_search.py speed  [--population 10 --generations 10 --seed 0]
    python benchmarks/drive_search.py rates  [--seeds 10 --noise-percent 0 --workers 2 ...]
    python benchmarks/drive_search.py emps   [--decimate 10] [--preset data|emps]
                                             [--search [--search-seeds N]]

``speed``: one whole search with 1 worker and with ``--workers`` workers (both through a
``ProcessPoolExecutor`` ``submit_batch``, same seed); prints wall times, the ratio, and checks
that both give the same result. ``rates``: searches on the paper's reference recording
(velocity noise = percent of the noise-free velocity range, seed 1000 + search seed) for seeds
0..n-1; prints how often the exact structure {two_mass, coulomb, viscous, stribeck} wins and
the wall times. ``--paper`` switches to the paper's search
(``models.drivetrain.gp.presets.paper_settings``: raw roulette, no elite, every individual
re-identified from one start with up to 500 evaluations, no novelty, no prefilter) at
``--population`` × ``--generations``; default: ``GPSettings`` defaults.
``benchmarks/paper_modes.py`` compares ``greylab drive identify --paper`` (6 × 20) with the
defaults. For a seed
that misses, ``rates`` prints the generation since which its best led and its parameters.
``emps``: identification of {one_mass, coulomb, viscous, gravity} on the EMPS data (published
IDIM-LS values for comparison) and, with ``--search``, structure searches over the whole
function set for ``--search-seeds`` seeds from ``--seed``, centred on the recording's own
scales (``--preset data``, the default: ``models.drivetrain.scales``, no magnitude typed in)
or on the hand-tuned EMPS preset (``--preset emps``, ``presets.emps_settings``).

Compiled code (``--jit-cache``): ``cold`` (default) gives every search an empty disk cache
(a fresh ``GREYLAB_JIT_CACHE``), so both runs of ``speed`` compile the same structures and
pay the same compile time; ``warm`` uses the shared cache (results identical, times lower).
Worker processes are fresh for every search (no in-memory simulators carried over).

``--repeats N`` runs the mode N times (default 1: a search takes a minute or more); the end
of the output is the README rows it backs (median, range, targets met in k/N repeats), also
written as JSON to ``build/bench/drive_search-<mode>.json``. ``make bench`` runs ``speed``
(figures regenerated into README by ``benchmarks/readme_figures.py``); the ``rates`` and
``emps --search`` rows of README were copied by hand, with their dates and loads.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from models.drivetrain import reference_recording
from models.drivetrain.gp import GPSettings, IdentificationSettings, StructureSearch
from models.drivetrain.gp.presets import (
    EMPS_PUBLISHED,
    data_settings,
    emps_settings,
    paper_settings,
)
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.scales import estimate_scales
from schemas.drive import emps_path

TRUTH = ["two_mass", "coulomb", "viscous", "stribeck"]
EMPS = emps_path()


class ProcessMap:
    """``submit_batch`` on a fresh process pool (workers keep their compiled simulators);
    ``in_map_s``: wall time the search waits for its workers (in a future's result),
    ``busy_s``: the identifications' own wall times summed, so a search's wall time minus
    ``busy_s / workers`` is the time a worker has nothing to do."""

    def __init__(self, workers: int) -> None:
        self.pool = ProcessPoolExecutor(max_workers=workers)
        self.in_map_s = self.busy_s = 0.0
        self.evals: list = []  # every evaluation the search waited for (``costliest``)

    def submit(self, fn, batch):
        future = self.pool.submit(fn, batch)
        return SimpleNamespace(result=lambda: self._wait(future))

    def _wait(self, future):
        t0 = time.perf_counter()
        evals = future.result()
        self.in_map_s += time.perf_counter() - t0
        self.busy_s += sum(ev.wall_s for ev in evals)
        self.evals += evals
        return evals

    def close(self) -> None:
        self.pool.shutdown()


def recording(noise_percent: float, seed: int):
    clean = reference_recording()
    sigma = noise_percent / 100.0 * float(np.ptp(clean["velocity_rad_s"]))
    return reference_recording(noise=sigma, seed=1000 + seed)


def settings(args, rec=None) -> GPSettings:
    """The search's settings: the reference drive's units, or with ``--preset data`` the
    recording's own scales (``rec``)."""
    size = {"population": args.population, "generations": args.generations}
    if args.preset == "data" and rec is not None:
        base = data_settings(estimate_scales(rec), position="position_rad" in rec,
                             wide=args.boxes == "wide", **size)  # fmt: skip
    else:
        base = GPSettings(**size)
    if args.paper:  # the paper's search at the asked size (no prefilter: --prefilter-hz unused)
        return paper_settings(base, **size)
    ident = replace(base.identification, prefilter_hz=prefilter_hz(args, rec),
                    screen_fraction=args.screen_fraction)  # fmt: skip
    return replace(base, identification=ident, polish_rounds=args.polish_rounds)


def prefilter_hz(args, rec=None) -> float:
    """``--prefilter-hz``: a cut-off in Hz, or ``spectrum``, the recording spectrum's own (as
    ``greylab drive identify --prefilter spectrum``; without a recording yet: the default)."""
    if args.prefilter_hz != "spectrum":
        return float(args.prefilter_hz)
    if rec is None:
        return IdentificationSettings().prefilter_hz
    from flows.drive.inputs import prefilter_cutoff

    return float(prefilter_cutoff("spectrum", rec))


def show_generation(g: int, n: int, best) -> None:
    print(f"  generation {g + 1}/{n}: best so far {list(best.codes)} fitness {best.fitness:.4g}",
          flush=True)  # fmt: skip


def run(args, seed: int, workers: int, rec, gp: GPSettings | None = None, progress=None,
        pmap: ProcessMap | None = None):  # fmt: skip
    """One whole search with fresh workers (and a cold JIT cache unless ``--jit-cache warm``)
    on ``pmap`` (default a new ``ProcessMap(workers)``), which is closed after it."""
    gp = gp or settings(args)
    with tempfile.TemporaryDirectory(prefix="greylab-jit-") as tmp:
        previous = os.environ.get("GREYLAB_JIT_CACHE")
        if args.jit_cache == "cold":
            os.environ["GREYLAB_JIT_CACHE"] = tmp  # inherited by the fresh workers
        pmap = pmap or ProcessMap(workers)
        t0 = time.perf_counter()
        try:
            search = StructureSearch(gp.population, gp.generations, seed, gp.test_fraction,
                                     settings=gp, submit_batch=pmap.submit, progress=progress).fit(rec)  # fmt: skip
        finally:
            pmap.close()
            if args.jit_cache == "cold":
                os.environ.pop("GREYLAB_JIT_CACHE")
                if previous is not None:
                    os.environ["GREYLAB_JIT_CACHE"] = previous
        return search, time.perf_counter() - t0


def describe(args) -> str:
    return (f"population {args.population} x generations {args.generations}, "
            f"{'paper operators' if args.paper else 'default operators'}, noise "
            f"{args.noise_percent} % of range, prefilter "
            f"{args.prefilter_hz}{'' if args.prefilter_hz == 'spectrum' else ' Hz'}, screen fraction "
            f"{args.screen_fraction}, polish rounds {settings(args).polish_rounds}, JIT cache "
            f"{args.jit_cache}, preset {args.preset}, boxes {args.boxes}")  # fmt: skip


def speed(args, bench: Bench) -> None:
    rec = recording(args.noise_percent, args.seed)
    as_arrays(rec)  # the schema's first validation imports ~0.8 s of modules: not in either time
    print(describe(args), f"seed {args.seed}; load average before: {os.getloadavg()}")
    one, t1 = run(args, args.seed, 1, rec)
    pool = ProcessMap(args.workers)
    two, t2 = run(args, args.seed, args.workers, rec, pmap=pool)
    idle = t2 - pool.busy_s / args.workers
    print(f"1 worker : {t1:7.1f} s  best {one.best_codes_} ({one.n_evaluations_} identifications)")
    print(f"{args.workers} workers: {t2:7.1f} s  best {two.best_codes_}")
    print(f"speed-up {t1 / t2:.2f}x (target >= 1.8x); whole search {t2:.1f} s (target <= 20 s)")
    same = (
        one.best_structure_ == two.best_structure_ and one.best_parameters_ == two.best_parameters_
    )
    print(f"same result: {same}; load average after: {os.getloadavg()}")
    print(f"{args.workers} workers: {t2 - pool.in_map_s:.2f} s in the main process not waiting "
          f"for workers; wall time minus the identifications' work / workers {idle:.2f} s")  # fmt: skip
    search = (f"one whole search ({args.population} × {args.generations}, seed {args.seed}, "
              "cold compile cache)")  # fmt: skip
    bench.add("one_worker_s", t1, f"{search}, 1 worker", unit="s", fmt=".1f")
    bench.add("workers_s", t2, f"same, {args.workers} workers", unit="s", fmt=".1f",
              target=("<=", 20.0), short=f"drive search, {args.workers} workers")  # fmt: skip
    bench.add("speedup", t1 / t2, f"speed-up 1 → {args.workers} workers (same run)", unit="×",
              fmt=".2f", target=(">=", 1.8),
              short=f"drive speed-up 1 → {args.workers} workers")  # fmt: skip
    bench.add("main_s", t2 - pool.in_map_s, f"same, {args.workers} workers: main process not "
              "waiting for its workers (start-up, breeding, bookkeeping)", unit="s", fmt=".2f")  # fmt: skip
    bench.add("idle_s", idle, f"same, {args.workers} workers: wall time not covered by the "
              "identifications (wall minus their work / workers: idle workers, the main "
              "process's own work, start-up)", unit="s", fmt=".2f")  # fmt: skip
    codes = "{" + ",".join(map(str, two.best_codes_)) + "}"
    bench.add("result", f"{codes}, {'same' if same else 'NOT the same'} with 1 worker",
              "structure found")  # fmt: skip


def rates(args, bench: Bench) -> None:
    hits, times, misses = 0, [], []
    print(describe(args), f"workers {args.workers}")
    for seed in range(args.seeds):
        rec = recording(args.noise_percent, seed)
        search, wall = run(args, seed, args.workers, rec, settings(args, rec))
        ok = search.best_structure_ == TRUTH
        hits += ok
        times.append(wall)
        print(f"seed {seed}: {search.best_codes_} {'OK' if ok else '--'} {wall:6.1f} s "
              f"({search.n_evaluations_} identifications, load {os.getloadavg()[0]:.1f})",
              flush=True)  # fmt: skip
        if not ok:  # where the search ended: first generation with that best, its parameters
            misses.append(f"seed {seed}: {{{','.join(map(str, search.best_codes_))}}}")
            h = search.history_
            first = int(h.loc[h["overall_best_codes"] == h["overall_best_codes"].iloc[-1],
                              "generation"].min()) + 1  # fmt: skip
            print(
                f"    best since generation {first}/{args.generations}: "
                + ", ".join(f"{k}={v:.3g}" for k, v in search.best_parameters_.items())
            )
    print(f"exact structure in {hits}/{args.seeds} seeds; wall median {np.median(times):.1f} s, "
          f"max {np.max(times):.1f} s")  # fmt: skip
    missed = f" ({'; '.join(misses)})" if misses else ""
    bench.add("hits", f"{hits}/{args.seeds}{missed}", f"exact structure found ({describe(args)}, "
              f"{args.workers} workers), seeds")  # fmt: skip
    bench.add("median_s", float(np.median(times)), "wall per search, median over the seeds",
              unit="s", fmt=".1f")  # fmt: skip
    bench.add("max_s", float(np.max(times)), "wall per search, max over the seeds", unit="s",
              fmt=".1f")  # fmt: skip


def emps_gp_settings(args, frame) -> GPSettings:
    """The EMPS search's settings: the recording's own scales (``--preset data``, the default:
    no hand-typed magnitude) or the hand-tuned EMPS preset."""
    size = {"population": args.population, "generations": args.generations}
    if args.preset == "data":
        scales = estimate_scales(frame)
        print(scales.summary())
        gp = data_settings(scales, position=args.position_weight > 0,
                           wide=args.boxes == "wide", **size)  # fmt: skip
        gp = replace(gp, f_tanh=args.f_tanh or gp.f_tanh)
        ident = replace(gp.identification, position_weight=args.position_weight)
    else:
        gp = emps_settings(position_weight=args.position_weight, f_tanh=args.f_tanh or 1000.0,
                           **size)  # fmt: skip
        ident = gp.identification
    return replace(gp, polish_rounds=args.polish_rounds,
                   identification=replace(ident, prefilter_hz=prefilter_hz(args, frame),
                                          screen_fraction=args.screen_fraction))  # fmt: skip


def emps(args, bench: Bench) -> None:
    from models.drivetrain.gp import IndividualSpec, as_arrays, identify
    from schemas.drive import load_emps

    frame = load_emps(EMPS, decimate=args.decimate)
    gp = emps_gp_settings(args, frame)
    full = replace(gp, identification=replace(gp.identification, screen_nfev=0))
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    t0 = time.perf_counter()
    ev = identify(spec, as_arrays(frame), full)
    wall = time.perf_counter() - t0
    print(f"EMPS {{1,5,6,8}} (decimate {args.decimate}, preset {args.preset}, f_tanh "
          f"{gp.f_tanh:.4g}, position weight {args.position_weight}) identified in {wall:.1f} s, "
          f"RSS {ev.rss:.4g}")  # fmt: skip
    bench.add("fit", report(ev.parameters), "EMPS {1,5,6,8} fit vs published IDIM-LS values")
    bench.add("fit_s", wall, "same, identification wall time", unit="s", fmt=".2f")
    if args.search:
        emps_searches(args, bench, frame, gp)


def emps_searches(args, bench: Bench, frame, gp: GPSettings) -> None:
    """Structure searches over the whole function set for seeds ``--seed`` .. ``--seed +
    --search-seeds - 1``: hits of {1,5,6,8}, wall times, worst parameter error."""
    hits, walls, errors, found = 0, [], [], []
    for seed in range(args.seed, args.seed + args.search_seeds):
        pool = ProcessMap(args.workers)
        search, wall = run(args, seed, args.workers, frame, gp, show_generation, pmap=pool)
        print_costliest(search, pool, args.costliest)
        codes = "{" + ",".join(map(str, search.best_codes_)) + "}"
        print(f"search {args.population} x {args.generations} seed {seed}, {args.workers} "
              f"workers: {codes} {search.best_structure_} in {wall:.1f} s "
              f"({search.n_evaluations_} identifications, load {os.getloadavg()[0]:.1f})",
              flush=True)  # fmt: skip
        print(search.history_[["generation", "best_codes", "best_fitness"]].to_string(index=False))
        print("choice by the evidence (StructureSearch.selection_):", search.selection_)
        walls.append(wall)
        found.append(codes)
        if codes == "{1,5,6,8}":
            hits += 1
            report(search.best_parameters_)
            errors += [abs(search.best_parameters_[k] / v - 1) for k, v in EMPS_PUBLISHED.items()]
    n = args.search_seeds
    what = (f"EMPS structure search ({args.population} × {args.generations}, preset "
            f"{args.preset}, boxes {args.boxes}, {args.workers} workers), seeds {args.seed}–{args.seed + n - 1}")  # fmt: skip
    bench.add("search", f"{{1,5,6,8}} in {hits}/{n} ({', '.join(found)})", what)
    bench.add("search_s", float(np.median(walls)), "same, wall per search, median", unit="s",
              fmt=".0f", target=("<=", 90.0), short="EMPS search median")  # fmt: skip
    bench.add("search_max_s", float(np.max(walls)), "same, wall per search, max", unit="s",
              fmt=".0f")  # fmt: skip
    worst = 100 * max(errors) if errors else float("nan")
    bench.add("search_worst_error", worst, "same, worst parameter error vs published "
              "IDIM-LS (hits only)", unit="%", fmt=".1f", target=("<=", 10.0))  # fmt: skip


def print_costliest(search, pool: ProcessMap, n: int) -> None:
    """How many identifications stopped at their time limit (``timed_out_``: the answer may
    then depend on the load) and, with ``n``, the ``n`` costliest of the search (its
    generations, local search and final stage): where its time went."""
    print(f"{len(search.timed_out_)} identifications stopped at the time limit "
          f"({', '.join(sorted(set(search.timed_out_))) or '-'}); busy {pool.busy_s:.0f} "
          "worker-s", flush=True)  # fmt: skip
    for ev in sorted(pool.evals, key=lambda e: -e.wall_s)[:n]:
        print(f"  {ev.wall_s:7.1f} s  {ev.n_sub:5d} substeps  {ev.nfev:5d} sims  "
              f"{'TIMED OUT ' if ev.timed_out else ''}{'+'.join(ev.structure)}  RSS "
              f"{ev.rss:.4g}  {ev.message[:70]}", flush=True)  # fmt: skip


def report(parameters: dict) -> str:
    """Print each parameter against its published value; the relative errors in one line."""
    errors = []
    for k, ref in EMPS_PUBLISHED.items():
        value = parameters[k]
        print(
            f"  {k}: {value:10.4f}  published {ref:10.4f}  rel. error {(value - ref) / ref:+7.1%}"
        )
        errors.append(f"{k} {(value - ref) / ref:+.1%}")
    return ", ".join(errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["speed", "rates", "emps"])
    parser.add_argument("--population", type=int, default=10)
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--noise-percent", type=float, default=0.0)
    parser.add_argument("--prefilter-hz", "--prefilter", default=None,
                        help="cut-off in Hz (0: none) or spectrum: the recording's own")  # fmt: skip
    parser.add_argument(
        "--screen-fraction",
        type=float,
        default=IdentificationSettings().screen_fraction,
        help="head of the record the screening stage fits (1: all of it)",
    )
    parser.add_argument("--paper", action="store_true", help="the paper's search (operators)")
    parser.add_argument("--jit-cache", choices=["cold", "warm"], default="cold")
    parser.add_argument("--decimate", type=int, default=10)
    parser.add_argument("--costliest", type=int, default=0, metavar="N",
                        help="emps --search: also list each search's N costliest identifications")  # fmt: skip
    parser.add_argument("--f-tanh", type=float, default=None, help="emps: default the preset's")
    parser.add_argument(
        "--preset",
        choices=["data", "emps", "reference"],
        default=None,
        help="scales from the data, the hand-tuned EMPS preset or the paper's "
        "units (default: data for emps, reference otherwise)",
    )
    parser.add_argument("--search-seeds", type=int, default=1, help="emps --search: seeds")
    parser.add_argument("--boxes", choices=["wide", "narrow"], default="narrow",
                        help="--preset data: issue 13's boxes (the default) or issue 26's wide")  # fmt: skip
    parser.add_argument("--polish-rounds", type=int, default=GPSettings().polish_rounds,
                        help="local search after the last generation (0: off)")  # fmt: skip
    parser.add_argument("--position-weight", type=float, default=1.0)
    parser.add_argument("--search", action="store_true", help="emps: also a structure search")
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    if args.costliest < 0:
        parser.error(f"--costliest {args.costliest}: a count of identifications, 0 or more")
    if args.preset is None:
        args.preset = "data" if args.mode == "emps" else "reference"
    if args.prefilter_hz is None:
        args.prefilter_hz = IdentificationSettings().prefilter_hz
    elif args.prefilter_hz != "spectrum":
        try:
            args.prefilter_hz = float(args.prefilter_hz)
        except ValueError:
            parser.error(f"--prefilter-hz {args.prefilter_hz!r}: a cut-off in Hz or spectrum")
    bench = Bench(f"drive_search-{args.mode}", "drive", args.repeats, args.json)
    for _ in bench.runs():
        {"speed": speed, "rates": rates, "emps": emps}[args.mode](args, bench)
    bench.finish()


if __name__ == "__main__":
    main()

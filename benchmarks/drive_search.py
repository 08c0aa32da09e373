"""Drive-train structure search: success rates over seeds, wall time, parallel speed-up.

    python benchmarks/drive_search.py speed  [--population 6 --generations 20 --seed 0]
    python benchmarks/drive_search.py rates  [--seeds 10 --noise-percent 0 --workers 2 ...]
    python benchmarks/drive_search.py emps   [--decimate 10]

``speed``: one whole search with 1 worker (serial map) and with 2 workers
(``ProcessPoolExecutor`` map_batches), same seed; prints wall times, the ratio, and checks
that both give the same result. ``rates``: searches on the paper's reference recording
(noise = percent of the noise-free velocity range) for seeds 0..n-1; prints how often the
exact structure {two_mass, coulomb, viscous, stribeck} wins and the wall times.
``emps``: identification of {one_mass, coulomb, viscous, gravity} on the EMPS data with
per-recording nominals (prismatic drive: kg, N s/m, N) against the published values.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from methods.gp import GPSettings, StructureSearch
from models.drivetrain import reference_recording

TRUTH = ["two_mass", "coulomb", "viscous", "stribeck"]


class ProcessMap:
    """``map_batches`` on a process pool (workers keep their compiled simulators)."""

    def __init__(self, workers: int) -> None:
        self.pool = ProcessPoolExecutor(max_workers=workers)

    def __call__(self, fn, batches):
        return list(self.pool.map(fn, batches))

    def close(self) -> None:
        self.pool.shutdown()


def recording(noise_percent: float, seed: int):
    clean = reference_recording()
    sigma = noise_percent / 100.0 * float(np.ptp(clean["velocity_rad_s"]))
    return reference_recording(noise=sigma, seed=1000 + seed)


def run(args, seed: int, workers: int, rec) -> tuple[StructureSearch, float]:
    pmap = ProcessMap(workers) if workers > 1 else None
    t0 = time.perf_counter()
    try:
        search = StructureSearch(population=args.population, generations=args.generations,
                                 seed=seed, map_batches=pmap).fit(rec)  # fmt: skip
    finally:
        if pmap:
            pmap.close()
    return search, time.perf_counter() - t0


def speed(args) -> None:
    rec = recording(args.noise_percent, args.seed)
    one, t1 = run(args, args.seed, 1, rec)
    two, t2 = run(args, args.seed, args.workers, rec)
    print(f"population {args.population} x generations {args.generations}, seed {args.seed}")
    print(f"1 worker : {t1:7.1f} s  best {one.best_codes_} ({one.n_evaluations_} identifications)")
    print(f"{args.workers} workers: {t2:7.1f} s  best {two.best_codes_}")
    print(f"speed-up {t1 / t2:.2f}x (target >= 1.6x); whole search {t2:.1f} s (target <= 120 s)")
    print(
        f"same result: {one.best_structure_ == two.best_structure_ and one.best_parameters_ == two.best_parameters_}"
    )


def rates(args) -> None:
    hits, times = 0, []
    for seed in range(args.seeds):
        search, wall = run(args, seed, args.workers, recording(args.noise_percent, seed))
        ok = search.best_structure_ == TRUTH
        hits += ok
        times.append(wall)
        print(f"seed {seed}: {search.best_codes_} {'OK' if ok else '--'} {wall:6.1f} s", flush=True)
    print(f"exact structure in {hits}/{args.seeds} seeds (noise {args.noise_percent} % of range, "
          f"population {args.population} x {args.generations}); wall median "
          f"{np.median(times):.1f} s, max {np.max(times):.1f} s")  # fmt: skip


def emps(args) -> None:
    from methods.gp import IndividualSpec, as_arrays, identify
    from schemas.drive import load_emps

    rec = as_arrays(load_emps("/work/shared/data/emps/DATA_EMPS.mat", decimate=args.decimate))
    settings = GPSettings(nominals={"J1": 100.0, "f_v": 200.0, "M_C": 20.0},
                          bounds={"M_G": (-20.0, 20.0)}, f_tanh=args.f_tanh)  # fmt: skip
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    t0 = time.perf_counter()
    ev = identify(spec, rec, settings)
    published = {"J1": 95.1089, "f_v": 203.5034, "M_C": 20.3935, "M_G": 3.1648}
    print(f"EMPS {{1,5,6,8}} identified in {time.perf_counter() - t0:.1f} s, RSS {ev.rss:.4g}")
    for k, ref in published.items():
        print(
            f"  {k}: {ev.parameters[k]:10.4f}  published {ref:10.4f}  "
            f"rel. error {abs(ev.parameters[k] - ref) / abs(ref):6.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["speed", "rates", "emps"])
    parser.add_argument("--population", type=int, default=6)
    parser.add_argument("--generations", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--noise-percent", type=float, default=0.0)
    parser.add_argument("--decimate", type=int, default=10)
    parser.add_argument("--f-tanh", type=float, default=1000.0)
    args = parser.parse_args()
    {"speed": speed, "rates": rates, "emps": emps}[args.mode](args)


if __name__ == "__main__":
    main()

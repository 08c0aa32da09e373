"""The papers' own modes (``--paper``) against greylab's defaults, side by side.

    python benchmarks/paper_modes.py [all|drive|press] [--seeds 5] [--workers 2]
                                     [--experiments 100] [--tests 30] [--repeats 1]

``drive``: structure searches on the paper's noise-free reference recording for seeds
0..``--seeds``-1, once with the settings ``greylab drive identify --paper`` runs
(``DriveSearch(paper=True).search_settings()``: the paper's 6 × 20 search, docs/methods.md
§2.6) and once with the defaults (``DriveSearch().search_settings()``: 10 × 10 with greylab's
operators); each search with fresh worker processes and a cold compile cache
(``benchmarks/drive_search.py``'s ``run``). Prints how often the exact reference structure
{two_mass, coulomb, viscous, stribeck} wins, where the misses end, and the wall time per search.

``press``: the family-wise rejection rate of the true model (twin truth M1, M2, M3; the same
seeded experiments as ``benchmarks/press_calibration.py``: ``--experiments`` twin experiments
× ``--tests`` random half-splits, sensors D and F) with the statistic and correction of
``PressStudy(paper=True)`` (the paper's ``dᵀC_cal⁻¹d``, Bonferroni; §1.7) and of ``PressStudy()``
(the default ``dᵀ(C_cal + C_val)⁻¹d``, Bonferroni), at the study's TOL.

The settings come from the settings models, so the rows measure what the switch switches.
The searches and experiments are seeded: a repeat changes only the wall times (``--repeats``
defaults to 1). The end of the output is the README rows (drive section, copied by hand with
date, seeds and load), also written as JSON to ``build/bench/paper_modes.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from benchmarks.drive_search import TRUTH, recording, run
from benchmarks.press_calibration import MODELS, SENSORS
from flows.drive.settings import DriveSearch
from flows.press.settings import PressStudy
from methods import correct_to_setpoints, detect_model_uncertainty
from models.press import simulate_press


def drive(args, bench: Bench) -> None:
    modes = {"paper": DriveSearch(paper=True), "default": DriveSearch()}
    for name, study in modes.items():
        gp = study.search_settings()
        size = f"{gp.population} × {gp.generations}"
        hits, walls, misses, evaluations = 0, [], [], []
        for seed in range(args.seeds):
            search, wall = run(args, seed, args.workers, recording(0.0, seed), gp)
            ok = search.best_structure_ == TRUTH
            hits += ok
            walls.append(wall)
            evaluations.append(search.n_evaluations_)
            codes = "{" + ",".join(map(str, search.best_codes_)) + "}"
            if not ok:
                misses.append(f"seed {seed}: {codes}")
            print(f"{name:7s} seed {seed}: {codes} {'OK' if ok else '--'} {wall:6.1f} s "
                  f"({search.n_evaluations_} identifications, load {os.getloadavg()[0]:.1f})",
                  flush=True)  # fmt: skip
        label = "the paper's search (`--paper`: " if name == "paper" else "greylab's defaults ("
        missed = f"; {'; '.join(misses)}" if misses else ""
        bench.add(f"drive_{name}_hits",
                  f"{hits}/{args.seeds} ({int(np.median(evaluations))} identifications per "
                  f"search, median{missed})",
                  f"drive: exact reference structure found, {label}{size}), seeds 0–"
                  f"{args.seeds - 1}, noise-free reference, {args.workers} workers")  # fmt: skip
        bench.add(f"drive_{name}_median_s", float(np.median(walls)),
                  "same, wall per search, median over the seeds", unit="s", fmt=".1f")  # fmt: skip
        bench.add(f"drive_{name}_max_s", max(walls), "same, wall per search, max over the seeds",
                  unit="s", fmt=".0f")  # fmt: skip


def size(truth: str, study: PressStudy, n_exp: int, n_tests: int) -> float:
    """Family-wise rejection rate of the true model ``truth`` with the study's test."""
    rejected = 0
    for e in range(n_exp):
        table = correct_to_setpoints(simulate_press(truth, seed=1000 + e)[0])
        rejected += detect_model_uncertainty(
            MODELS[truth], table, n_tests=n_tests, tol=study.tol, statistic=study.statistic,
            correction=study.correction, seed=e, sensors=SENSORS,
            calibration_fraction=study.calibration_fraction,
        ).rejected  # fmt: skip
    return rejected / n_exp


def press(args, bench: Bench) -> None:
    modes = {"paper": PressStudy(paper=True), "default": PressStudy()}
    for name, study in modes.items():
        rates = {truth: size(truth, study, args.experiments, args.tests) for truth in MODELS}
        text = ", ".join(f"{t} {r:.3f}" for t, r in rates.items())
        test = f"{study.statistic.value} + {study.correction.value}, TOL {study.tol}"
        print(f"{name:7s} ({test}): family-wise rejection rate of the true model {text}",
              flush=True)  # fmt: skip
        label = "the paper's test (`--paper`: " if name == "paper" else "greylab's default ("
        bench.add(f"press_{name}", text,
                  f"press: family-wise rejection rate of the true model, {label}{test}), "
                  f"{args.experiments} twin experiments × {args.tests} random splits")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", choices=["all", "drive", "press"], default="all")
    parser.add_argument("--seeds", type=int, default=5, help="drive: searches 0..n-1 per mode")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jit-cache", choices=["cold", "warm"], default="cold")
    parser.add_argument("--experiments", type=int, default=100, help="press: twin experiments")
    parser.add_argument("--tests", type=int, default=30, help="press: random splits each")
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    bench = Bench("paper_modes" if args.part == "all" else f"paper_modes-{args.part}",
                  "drive", args.repeats, args.json)  # fmt: skip
    for _ in bench.runs():
        t0 = time.perf_counter()
        if args.part in ("all", "drive"):
            drive(args, bench)
        if args.part in ("all", "press"):
            press(args, bench)
        bench.add("wall_s", time.perf_counter() - t0, "wall time of the whole comparison",
                  unit="s", fmt=".0f")  # fmt: skip
    bench.finish()


if __name__ == "__main__":
    main()

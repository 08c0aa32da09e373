"""Calibration (size) and power of the detection test by simulation.

For each truth in {M1, M2, M3}: ``N_EXPERIMENTS`` twin experiments (new seed each), corrected
to setpoints, ``N_TESTS`` random half-splits, TOL = 0.05, Bonferroni, sensors D and F (the
E-optimal design). Prints the family-wise rejection rate of the TRUE model with the default
(difference) and the paper statistic, with a binomial 3-sigma bound, and the power (rejection
rate) against each wrong friction model.

The experiments are seeded: every repeat gives the same rates (only the wall time varies), so
``--repeats`` defaults to 1.

Run: ``.venv/bin/python benchmarks/press_calibration.py [n_experiments] [n_tests] [--repeats 1]``
(defaults 200 30; README rows at the end, JSON in ``build/bench/press_calibration.json``)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from methods import correct_to_setpoints, detect_model_uncertainty
from models.press import M1, M2, M3, simulate_press

TOL = 0.05
SENSORS = ["D_vertical", "F_horizontal"]
MODELS = {"M1": M1, "M2": M2, "M3": M3}


def rejections(truth: str, n_exp: int, n_tests: int) -> dict:
    """Rejections of every model (both statistics for the truth) over ``n_exp`` experiments."""
    rej = {(m, s): 0 for m in MODELS for s in ("difference", "paper")}
    for e in range(n_exp):
        table = correct_to_setpoints(simulate_press(truth, seed=1000 + e)[0])
        for name, model in MODELS.items():
            stats = ("difference", "paper") if name == truth else ("difference",)
            for st in stats:
                det = detect_model_uncertainty(
                    model, table, n_tests=n_tests, statistic=st, seed=e, sensors=SENSORS
                )
                rej[(name, st)] += det.rejected
    return rej


def measure(bench: Bench, n_exp: int, n_tests: int) -> None:
    t0 = time.perf_counter()
    bound = TOL + 3 * np.sqrt(TOL * (1 - TOL) / n_exp)
    print(f"{n_exp} experiments x {n_tests} random splits, TOL {TOL}, Bonferroni; "
          f"size bound TOL + 3 sd = {bound:.3f}")  # fmt: skip
    paper, power = [], []
    for truth in MODELS:
        rej = rejections(truth, n_exp, n_tests)
        size_d = rej[(truth, "difference")] / n_exp
        size_p = rej[(truth, "paper")] / n_exp
        powers = {m: rej[(m, "difference")] / n_exp for m in MODELS if m != truth}
        print(f"truth {truth}: size difference {size_d:.3f} "
              f"({'OK' if size_d <= bound else 'ABOVE BOUND'}), size paper {size_p:.3f}; power "
              + ", ".join(f"{m}: {p:.3f}" for m, p in powers.items()))  # fmt: skip
        what = (f"family-wise rejection rate of the true model, default statistic, truth "
                f"{truth} ({n_exp} experiments × {n_tests} random splits, TOL {TOL}, "
                f"Bonferroni; limit TOL + 3 binomial sd)" if truth == "M1"
                else f"same, truth {truth}")  # fmt: skip
        bench.add(
            f"size_{truth}",
            size_d,
            what,
            fmt=".3f",
            target=("<=", round(bound, 3)),
            short=f"press test size, truth {truth}",
        )
        paper.append(f"{truth} {size_p:.3f}")
        power += powers.values()
    wall = time.perf_counter() - t0
    print(f"wall time {wall:.1f} s")
    bench.add("size_paper", ", ".join(paper), "same, paper statistic, truth M1, M2, M3")
    bench.add("power", min(power), "power against the wrong friction models (smallest of the "
              "6 pairs)", fmt=".3f")  # fmt: skip
    bench.add("wall_s", wall, "wall time of the whole simulation", unit="s", fmt=".0f")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_experiments", type=int, nargs="?", default=200)
    parser.add_argument("n_tests", type=int, nargs="?", default=30)
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    bench = Bench("press_calibration", "press", args.repeats, args.json)
    for _ in bench.runs():
        measure(bench, args.n_experiments, args.n_tests)
    bench.finish()


if __name__ == "__main__":
    main()

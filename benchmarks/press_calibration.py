"""Calibration (size) and power of the detection test by simulation.

For each truth in {M1, M2, M3}: ``N_EXPERIMENTS`` twin experiments (new seed each), corrected
to setpoints, ``N_TESTS`` random half-splits, TOL = 0.05, Bonferroni, sensors D and F (the
E-optimal design). Prints the family-wise rejection rate of the TRUE model with the default
(difference) and the paper statistic, with a binomial 3-sigma bound, and the power (rejection
rate) against each wrong friction model.

Run: ``.venv/bin/python benchmarks/press_calibration.py [n_experiments] [n_tests]``
"""

from __future__ import annotations

import sys
import time

import numpy as np

from methods import correct_to_setpoints, detect_model_uncertainty
from models.press import M1, M2, M3, simulate_press

TOL = 0.05
SENSORS = ["D_vertical", "F_horizontal"]
MODELS = {"M1": M1, "M2": M2, "M3": M3}


def main(n_exp: int = 200, n_tests: int = 30) -> None:
    t0 = time.perf_counter()
    bound = TOL + 3 * np.sqrt(TOL * (1 - TOL) / n_exp)
    print(f"{n_exp} experiments x {n_tests} random splits, TOL {TOL}, Bonferroni; "
          f"size bound TOL + 3 sd = {bound:.3f}")  # fmt: skip
    for truth in MODELS:
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
        size_d = rej[(truth, "difference")] / n_exp
        size_p = rej[(truth, "paper")] / n_exp
        power = ", ".join(
            f"{m}: {rej[(m, 'difference')] / n_exp:.3f}" for m in MODELS if m != truth
        )
        print(f"truth {truth}: size difference {size_d:.3f} "
              f"({'OK' if size_d <= bound else 'ABOVE BOUND'}), size paper {size_p:.3f}; "
              f"power {power}")  # fmt: skip
    print(f"wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    main(*args)

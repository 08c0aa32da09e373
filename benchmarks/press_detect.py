"""Speed of the detection core: 3 models x 1000 tests on the default twin (truth M3).

Core: one compiled CasADi function per model (residuals, exact Jacobian, second-order term),
numpy Gauss-Newton/LM per calibration and validation fit. Baseline: scipy ``least_squares``
with finite-difference Jacobians on the per-residual problem (all series), covariance C1 from
its Jacobian -- i.e. the obvious implementation of the same work. The baseline runs
``BASELINE_TESTS`` tests per model and is scaled to 1000 (printed). Each of ``--repeats``
repeats measures core and baseline again; the speed-up is taken within a repeat.

Run: ``.venv/bin/python benchmarks/press_detect.py [--repeats 3]`` (README rows at the end,
JSON in ``build/bench/press_detect.json``)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from methods import correct_to_setpoints, make_splits, prepare, run_split_batch
from models.press import M1, M2, M3, simulate_press

N_TESTS = 1000
BASELINE_TESTS = 100
SENSORS = ["D_vertical", "F_horizontal"]


def baseline_tests(prep, splits) -> list[float]:
    """Same tests with scipy least_squares (2-point finite differences), C1 covariance."""
    model, q = prep.model, prep.setpoints
    cols = prep.cols
    out = []
    for sp in splits:
        fits = []
        for idx in (sp.cal, sp.val):
            z = prep.z[:, list(idx), :]  # (n_M, n_sub, n_sel)

            def resid(x, z=z, idx=idx):
                h = model.response(x * prep.scale, q)[list(idx)][:, cols]
                return ((h[None] - z) / prep.sigma).ravel()

            r = optimize.least_squares(resid, prep.start / prep.scale, method="trf")
            J = r.jac / prep.scale
            fits.append((r.x * prep.scale, np.linalg.inv(J.T @ J)))
        (pc, Cc), (pv, Cv) = fits
        d = pv - pc
        out.append(float(stats.chi2.sf(d @ np.linalg.solve(Cc + Cv, d), d.size)))
    return out


def measure(bench: Bench, table) -> None:
    """One repeat: core and baseline for each model, their totals and the ratio."""
    core_total, base_total, agreement = 0.0, 0.0, []
    for model in (M1, M2, M3):
        prep = prepare(model, table, sensors=SENSORS)
        splits = make_splits("random", prep.setpoints, prep.loading, 6, N_TESTS, seed=0)
        run_split_batch(prep, splits[:2])  # compile outside the timing (once per model)
        t0 = time.perf_counter()
        rows = run_split_batch(prep, splits)
        t_core = time.perf_counter() - t0
        t0 = time.perf_counter()
        base = baseline_tests(prep, splits[:BASELINE_TESTS])
        t_base = (time.perf_counter() - t0) * N_TESTS / BASELINE_TESTS
        # both solve the same problems: p-values must agree (C vs C1 differ only slightly)
        agree = np.corrcoef(np.log(rows["alpha_min"][:BASELINE_TESTS] + 1e-300),
                            np.log(np.array(base) + 1e-300))[0, 1]  # fmt: skip
        print(f"{model.name}: core {t_core:6.2f} s for {N_TESTS} tests "
              f"({1e3 * t_core / N_TESTS:.2f} ms/test); baseline {t_base:7.1f} s "
              f"(measured {BASELINE_TESTS} tests, scaled x{N_TESTS // BASELINE_TESTS}); "
              f"corr(log p) {agree:.4f}")  # fmt: skip
        core_total += t_core
        base_total += t_base
        agreement.append(agree)
    speedup = base_total / core_total
    print(f"TOTAL core {core_total:.2f} s for 3 x {N_TESTS} tests (target <= 10 s); "
          f"baseline {base_total:.1f} s; speed-up {speedup:.1f}x (target >= 10x)")  # fmt: skip
    bench.add("core_s", core_total, f"detection core, 3 models × {N_TESTS} tests (twin, truth M3)",
              unit="s", fmt=".2f", target=("<=", 10.0),
              short=f"press detection core, 3 × {N_TESTS} tests")  # fmt: skip
    bench.add("baseline_s", base_total, f"baseline: scipy `least_squares`, finite differences "
              f"({BASELINE_TESTS} tests/model, scaled ×{N_TESTS // BASELINE_TESTS})",
              unit="s", fmt=".1f")  # fmt: skip
    bench.add("speedup", speedup, "speed-up of the core over the baseline of the same run",
              unit="×", fmt=".1f", target=(">=", 10.0),
              short="press detection speed-up over scipy")  # fmt: skip
    bench.add("agreement", min(agreement), "p-values agree with the baseline's: "
              "min over the models of corr(log p)", fmt=".4f")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    bench = Bench("press_detect", "press", args.repeats, args.json)
    table = correct_to_setpoints(simulate_press("M3", seed=1)[0])
    for _ in bench.runs():
        measure(bench, table)
    bench.finish()


if __name__ == "__main__":
    main()

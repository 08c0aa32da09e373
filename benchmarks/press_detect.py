"""Speed of the detection core: 3 models x 1000 tests on the default twin (truth M3).

Core: one compiled CasADi function per model (residuals, exact Jacobian, second-order term),
numpy Gauss-Newton/LM per calibration and validation fit. Baseline: scipy ``least_squares``
with finite-difference Jacobians on the per-residual problem (all series), covariance C1 from
its Jacobian -- i.e. the obvious implementation of the same work. The baseline runs
``BASELINE_TESTS`` tests per model and is scaled to 1000 (printed).

Run: ``.venv/bin/python benchmarks/press_detect.py``
"""

from __future__ import annotations

import time

import numpy as np
from scipy import optimize, stats

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


def main() -> None:
    table = correct_to_setpoints(simulate_press("M3", seed=1)[0])
    core_total, base_total = 0.0, 0.0
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
    print(f"TOTAL core {core_total:.2f} s for 3 x {N_TESTS} tests (target <= 10 s); "
          f"baseline {base_total:.1f} s; speed-up {base_total / core_total:.1f}x (target >= 10x)")  # fmt: skip


if __name__ == "__main__":
    main()

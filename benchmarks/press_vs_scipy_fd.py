"""Press detection vs scipy with finite differences on a small model (2 parameters, 3 sensors).

The twin's figure (``press_detect.py``: 3 models with 3-4 parameters, 2 sensors, 1000 tests)
says nothing about a small model, where each fit is cheap and whatever a test costs beyond its
fits (per-test Python overhead) decides the ratio. Here: a frame with stiffness ``k`` (N/um)
and a clearance ``c`` (um) closing as ``1 - exp(-F / 50 kN)``, read by three probes with their
own mixture of both; 6 series over the twin's 21-step scenario, sigma 0.5 um, truth = model.
Core: ``run_split_batch`` for ``N_TESTS`` random splits (compiled once, outside the timing;
the median of ``CORE_RUNS`` runs, as one run takes about 30 ms), all tests in one call and in
batches of ``BATCH`` (the batches of ``detect_model_uncertainty`` and of the flow's default
``batch_size``: the per-call overhead shows there).
Baseline: the same tests with scipy ``least_squares`` (2-point finite differences) and C1 from
its Jacobian (``press_detect.baseline_tests``), all ``N_TESTS`` of them. The ratio is taken
within a repeat.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/press_vs_scipy_fd.py [--repeats 3]`` (JSON in
``build/bench/press_vs_scipy_fd.json``)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import ClassVar

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from benchmarks.press_detect import baseline_tests
from methods import correct_to_setpoints, make_splits, prepare, run_split_batch
from tests.methods.press.helpers import table_from

N_TESTS = 300
CORE_RUNS = 5
BATCH = 25  # splits per call in detect_model_uncertainty and the flow (batch_size)
TARGET = 10.0  # speed-up over scipy-FD, as on the twin (issue 31)
MIX = np.array([[1.0, 0.2], [0.6, 0.5], [0.3, 1.0]])  # (sensor, part): compliance, clearance
FORCES = np.r_[np.linspace(0.0, 200e3, 11), np.linspace(180e3, 0.0, 10)]  # N, as the twin


class SmallFrame:
    """``h_s = a_s F / k + b_s c (1 - exp(-F / 50 kN))`` for three probes s."""

    name = "small_frame"
    sensors = ("probe_1", "probe_2", "probe_3")
    parameters: ClassVar[dict] = {"k": 2000.0, "c": 20.0}
    bounds: ClassVar[dict] = {"k": (100.0, 1e5), "c": (0.0, 200.0)}

    def response(self, p, forces):
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            parts = [forces / p[0], p[1] * (1 - ca.exp(-forces / 50e3))]
            return ca.horzcat(*[MIX[s, 0] * parts[0] + MIX[s, 1] * parts[1] for s in range(3)])
        f = np.asarray(forces, float)
        parts = np.column_stack([f / p[0], p[1] * (1 - np.exp(-f / 50e3))])
        return parts @ MIX.T


def twin_table(seed: int = 1, n_series: int = 6, sigma: float = 0.5):
    """Measurements of the true model (k 2100 N/um, c 18 um) with white noise."""
    rng = np.random.default_rng(seed)
    h = SmallFrame().response(np.array([2100.0, 18.0]), FORCES)
    z = h[None] + sigma * rng.standard_normal((n_series, *h.shape))
    return correct_to_setpoints(table_from(z, FORCES, SmallFrame.sensors))


def measure(bench: Bench, table) -> None:
    """One repeat: core and baseline on the same tests, and their ratio."""
    model = SmallFrame()
    prep = prepare(model, table)
    splits = make_splits("random", prep.setpoints, prep.loading, prep.z.shape[0], N_TESTS, 0)
    run_split_batch(prep, splits[:2])  # compile outside the timing
    for start in range(0, len(splits), BATCH):  # the batch-size maps too
        run_split_batch(prep, splits[start : start + BATCH])
    times, batched = [], []
    for _ in range(CORE_RUNS):  # 30 ms against a 1 s baseline: the median of a few runs
        t0 = time.perf_counter()
        rows = run_split_batch(prep, splits)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for start in range(0, len(splits), BATCH):
            run_split_batch(prep, splits[start : start + BATCH])
        batched.append(time.perf_counter() - t0)
    t_core, t_batched = float(np.median(times)), float(np.median(batched))
    t0 = time.perf_counter()
    base = baseline_tests(prep, splits)
    t_base = time.perf_counter() - t0
    agree = float(
        np.corrcoef(np.log(rows["alpha_min"] + 1e-300), np.log(np.array(base) + 1e-300))[0, 1]
    )
    ratio, ratio_batched = t_base / t_core, t_base / t_batched
    print(f"core {t_core:.3f} s for {len(splits)} tests ({1e3 * t_core / len(splits):.2f} ms/test);"
          f" in batches of {BATCH} {t_batched:.3f} s; scipy-FD {t_base:.2f} s; speed-up"
          f" {ratio:.1f}x, in batches {ratio_batched:.1f}x (target >= {TARGET:g}x);"
          f" corr(log p) {agree:.4f}")  # fmt: skip
    bench.add("core_s", t_core, f"detection core, small frame (2 parameters, 3 sensors), "
              f"{N_TESTS} tests", unit="s", fmt=".3f")  # fmt: skip
    bench.add("baseline_s", t_base, "baseline: scipy `least_squares`, finite differences, "
              "the same tests", unit="s", fmt=".2f")  # fmt: skip
    bench.add("speedup", ratio, "speed-up of the core over the baseline of the same run "
              "(small frame)", unit="×", fmt=".1f", target=(">=", TARGET),
              short="press speed-up over scipy-FD, small model")  # fmt: skip
    bench.add("speedup_batches", ratio_batched, f"same, the core in batches of {BATCH} splits "
              "(as `detect_model_uncertainty` and the flow's default `batch_size`)", unit="×",
              fmt=".1f", target=(">=", TARGET),
              short="press speed-up over scipy-FD, small model, batches of 25")  # fmt: skip
    bench.add("agreement", agree, "p-values agree with the baseline's: corr(log p)", fmt=".4f")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    bench = Bench("press_vs_scipy_fd", "press", args.repeats, args.json)
    table = twin_table()
    for _ in bench.runs():
        measure(bench, table)
    bench.finish()


if __name__ == "__main__":
    main()

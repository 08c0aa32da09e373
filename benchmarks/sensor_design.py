"""Sensor design at a real sensor count, through the CLI: 60 candidate probes of the shipped
frame example (``examples/gauges``), 4 parameters, at most 10 sensors, A/D/E.

Each repeat runs ``greylab press design --model gauges:Frame --sheet gauges.sensors.csv
--max-sensors 10 --criterion X --json`` in a fresh process (imports, model compilation,
branch-and-bound, output) and records its wall time and proven gap. Baseline, measured in the
same repeat: exhaustive enumeration, timed on ``ENUM_SAMPLE`` subsets of size 10 and scaled to
all C(60, 10) of them (the criterion of one subset from the same information blocks).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/sensor_design.py [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from benchmarks._report import Bench, add_arguments  # noqa: E402

GAUGES = ROOT / "examples" / "gauges"
ENUM_SAMPLE = 20_000
N_SELECT = 10


def cli_design(criterion: str) -> tuple[float, dict]:
    greylab = str(Path(sys.executable).parent / "greylab")
    args = [greylab, "press", "design", "--model", "gauges:Frame", "--sheet",
            "gauges.sensors.csv", "--max-sensors", str(N_SELECT), "--criterion", criterion,
            "--json"]  # fmt: skip
    env = {**os.environ, "GREYLAB_HOME": str(ROOT / "build" / "bench" / "greylab-home")}
    t0 = time.perf_counter()
    done = subprocess.run(args, cwd=GAUGES, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(done.stdout)


def enumeration_seconds() -> float:
    """Seconds to judge every subset of 10 of the 60 probes (timed sample, scaled)."""
    sys.path.insert(0, str(GAUGES))
    from gauges import Frame

    from methods.press.design.sensors import sensor_blocks

    M, _, _, _ = sensor_blocks(Frame(), None, sigma=dict.fromkeys(Frame.sensors, 0.5))
    rng = np.random.default_rng(0)
    subsets = [rng.choice(len(M), N_SELECT, replace=False) for _ in range(ENUM_SAMPLE)]
    t0 = time.perf_counter()
    for s in subsets:
        np.linalg.eigvalsh(M[s].sum(axis=0))  # the cheapest criterion (E) of one subset
    per_subset = (time.perf_counter() - t0) / ENUM_SAMPLE
    return per_subset * math.comb(len(M), N_SELECT)


def measure(bench: Bench) -> None:
    enum_s = enumeration_seconds()
    for criterion in ("E", "D", "A"):
        wall, out = cli_design(criterion)
        search = out["search"]
        print(f"{criterion}: {wall:.1f} s through the CLI, {search['nodes']} nodes, gap "
              f"{100 * search['gap']:.2f} % ({'proven' if search['proven'] else 'not proven'}), "
              f"chosen {out['best']['sensors']}")  # fmt: skip
        bench.add(f"wall_{criterion}", wall, f"60 candidate probes, ≤ 10 kept, {criterion}-optimal:"
                  " wall time of `greylab press design` (fresh process)", unit="s", fmt=".1f",
                  target=("<=", 60.0), short=f"sensor design 60 → ≤ 10, {criterion}")  # fmt: skip
        bench.add(f"gap_{criterion}", 100 * search["gap"], f"same, {criterion}: proven gap",
                  unit="%", fmt=".2f", target=("<=", 1.0),
                  short=f"sensor design proven gap, {criterion}")  # fmt: skip
        bench.add(f"speedup_{criterion}", enum_s / wall, f"same, {criterion}: speed-up over "
                  f"enumerating all C(60, 10) subsets (timed on {ENUM_SAMPLE}, scaled)",
                  unit="×", fmt=".3g")  # fmt: skip
    print(f"enumeration of all C(60, 10) = {math.comb(60, 10):.3g} subsets: {enum_s:.3g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    bench = Bench("sensor_design", "press", args.repeats, args.json)
    for _ in bench.runs():
        measure(bench)
    bench.finish()


if __name__ == "__main__":
    main()

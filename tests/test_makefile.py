"""`make bench` runs every benchmark, each with arguments it accepts."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench_recipe() -> str:
    text = (ROOT / "Makefile").read_text()
    match = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, flags=re.M)
    assert match, "Makefile has a bench target"
    return match.group(1)


def test_bench_runs_every_benchmark() -> None:
    recipe = _bench_recipe()
    missing = [p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name not in recipe]
    assert not missing, f"make bench does not run {missing}"


def test_drive_benchmark_gets_a_mode() -> None:
    # drive_search.py requires a mode (speed, rates, emps): without one `make bench` fails
    line = next(line for line in _bench_recipe().splitlines() if "drive_search.py" in line)
    assert re.search(r"drive_search\.py (speed|rates|emps)\b", line), line

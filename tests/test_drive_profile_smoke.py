"""`benchmarks/drive_profile.py` runs both modes at a tiny size and writes the rows it claims:
every time finite and positive, the profile's parts adding up to its wall, the naive baseline
held to its budget."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, *args: str) -> dict[str, list]:
    out = tmp_path / f"{args[0]}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "benchmarks/drive_profile.py", *args, "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["name"] == f"drive_profile-{args[0]}" and result["repeats"] == 1
    return {row["key"]: row["values"] for row in result["rows"]}


@pytest.mark.slow
def test_profile_accounts_for_the_search_wall(tmp_path: Path) -> None:
    rows = _run(tmp_path, "profile", "--population", "2", "--generations", "1")
    parts = ("compile_s", "simulate_s", "jacobian_s", "lsq_own_s", "other_s")
    for key in ("wall_s", "cc_s", "objective_s", "trf_s", *parts):
        (value,) = rows[key]
        assert math.isfinite(value) and value > 0, (key, value)
    assert rows["compile_calls"][0] >= 1 and rows["jacobian_calls"][0] >= 1
    assert sum(rows[k][0] for k in parts) == pytest.approx(rows["wall_s"][0], rel=1e-9)
    assert rows["cc_s"][0] <= rows["compile_s"][0]
    assert 0 < rows["other_share"][0] < 100
    assert rows["result"][0].startswith("{")


@pytest.mark.slow
def test_baseline_compares_greylab_with_a_bounded_naive_fit(tmp_path: Path) -> None:
    rows = _run(tmp_path, "baseline", "--naive-max-nfev", "2")
    for key in ("greylab_s", "compile_s", "cold_s", "naive_s", "ratio", "ratio_cold",
                "ratio_per_eval", "nfev_greylab", "nfev_naive", "sims_naive"):  # fmt: skip
        (value,) = rows[key]
        assert math.isfinite(value) and value > 0, (key, value)
    for key in ("rss_greylab", "rss_naive", "rss_floor"):
        assert math.isfinite(rows[key][0]) and rows[key][0] >= 0, key
    assert rows["nfev_naive"][0] <= 2 * 2  # two starts of at most 2 evaluations each
    assert rows["sims_naive"][0] > rows["nfev_naive"][0]  # the finite differences simulate too
    assert rows["cold_s"][0] > rows["compile_s"][0]

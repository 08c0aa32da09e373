"""`make bench` runs every benchmark, each with arguments it accepts and its repeats, then
regenerates the figure blocks of docs/performance.md from their JSON (``benchmarks/readme_figures.py``).

The figures themselves vary per machine and are not tested; the plumbing is."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks import readme_figures
from benchmarks._report import Bench

ROOT = Path(__file__).resolve().parents[1]


def _bench_recipe() -> str:
    text = (ROOT / "Makefile").read_text()
    match = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, flags=re.M)
    assert match, "Makefile has a bench target"
    return match.group(1)


def _benchmarks() -> list[Path]:
    """The benchmark scripts (``_*.py`` are their shared helpers)."""
    return [p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")]


def test_bench_runs_every_benchmark() -> None:
    recipe = _bench_recipe()
    missing = [p.name for p in _benchmarks() if p.name not in recipe]
    assert not missing, f"make bench does not run {missing}"


def test_drive_benchmark_gets_a_mode() -> None:
    # drive_search.py requires a mode (speed, rates, emps): without one `make bench` fails
    line = next(line for line in _bench_recipe().splitlines() if "drive_search.py" in line)
    assert re.search(r"drive_search\.py (speed|rates|emps)\b", line), line


def test_bench_repeats_then_regenerates_readme() -> None:
    lines = _bench_recipe().splitlines()
    runs = [line for line in lines if "benchmarks/" in line and "readme_figures" not in line]
    assert all(re.search(r"--repeats \d+", line) for line in runs), runs
    assert "benchmarks/readme_figures.py" in lines[-1], "the figure blocks come last"
    names = {Path(line.split("benchmarks/")[1].split()[0]).stem for line in runs}
    assert {name.split("-")[0] for name in readme_figures.SOURCES} <= names


def test_readme_has_every_figure_block() -> None:
    text = readme_figures.DOCUMENT.read_text(encoding="utf-8")
    found = [m.group(2) for m in readme_figures.BLOCK.finditer(text)]
    assert sorted(found) == sorted(readme_figures.BLOCKS), found


def test_figures_regenerate_only_inside_the_markers(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("sys.argv", ["benchmarks/press_detect.py", "--repeats", "3"])
    bench = Bench("press_detect", "press", 3, tmp_path / "press_detect.json")
    for i in bench.runs():
        bench.add("core_s", [8.0, 12.0, 9.0][i], "core", unit="s", fmt=".1f", target=("<=", 10))
        bench.add("result", "{2,5,6,7}", "structure")
    bench.finish()
    rows = json.loads((tmp_path / "press_detect.json").read_text())["rows"]
    assert rows[0]["summary"] | {"n": 3} == {"n": 3, "median": 9.0, "min": 8.0, "max": 12.0,
                                             "met": 2}  # fmt: skip
    readme = tmp_path / "README.md"
    blocks = "".join(f"<!-- figures:{b}:begin -->\nold\n<!-- figures:{b}:end -->\n"
                     for b in readme_figures.BLOCKS)  # fmt: skip
    readme.write_text(f"# intro\n{blocks}tail\n", encoding="utf-8")
    argv = ["--readme", str(readme), "--dir", str(tmp_path)]
    readme_figures.main(argv)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# intro\n") and text.endswith("tail\n")
    assert "| core | 9.0 s | 8.0–12.0 s (3 runs) | ≤ 10 s: met 2/3 |" in text
    assert "| structure | {2,5,6,7} | same in 3/3 runs |" in text
    assert "**met in some runs only**: core ≤ 10 s: met 2/3" in text
    assert re.search(r"<!-- figures:drive:begin[^>]*-->\nold\n", text)  # no JSON: left as it was
    assert readme_figures.main([*argv, "--check"]) == 1  # the other JSON files are missing

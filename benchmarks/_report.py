"""Repeated benchmark figures: median, range and targets, printed and written as JSON.

Every benchmark script runs its measurement ``--repeats`` times (``Bench.runs``), records each
repeat's value of each figure (``Bench.add``; a ratio is always taken against a baseline
measured in the same repeat) and ends with ``Bench.finish``: the figure rows it backs -- the
median and the range (min-max) over the repeats, and for each target in how many repeats it
was met -- on stdout and as JSON in ``build/bench/<name>.json``, which
``benchmarks/readme_figures.py`` turns into the generated figure blocks of docs/performance.md.

A figure is numeric (a float per repeat) or text (a string per repeat, e.g. a structure or a
count of solved problems; summarised by how many repeats gave each value).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "build" / "bench"
PREFIX = "PYTHONPATH=. .venv/bin/python"  # how every benchmark command is run (make bench)
SYMBOL = {"<=": "≤", ">=": "≥"}


@dataclass(frozen=True)
class Target:
    """``value op limit`` must hold in a repeat, e.g. ``Target("<=", 10)`` for "≤ 10 s"."""

    op: str
    limit: float

    def met(self, value: float) -> bool:
        return bool(value <= self.limit if self.op == "<=" else value >= self.limit)


@dataclass
class Figure:
    key: str
    what: str
    unit: str = ""
    fmt: str = ".3g"
    target: Target | None = None
    short: str = ""  # the target's name in README's list of targets (default: what)
    values: list = field(default_factory=list)


def fmt_value(value: float | str, fmt: str, unit: str) -> str:
    if isinstance(value, str):
        return value
    text = format(value, fmt)
    if not unit:
        return text
    return f"{text}{unit}" if unit == "×" else f"{text} {unit}"


def summary(row: dict) -> dict:
    """Median, min, max (numeric) or value counts (text), and the target count of one row."""
    values, n = row["values"], len(row["values"])
    out: dict = {"n": n}
    if values and all(isinstance(v, int | float) for v in values):
        out.update(median=statistics.median(values), min=min(values), max=max(values))
    else:
        out["counts"] = Counter(map(str, values)).most_common()
    if row.get("target"):
        target = Target(**row["target"])
        out["met"] = sum(target.met(v) for v in values)
    return out


def target_text(row: dict) -> str:
    """``≤ 10 s: met 3/3`` (or ``""`` without a target)."""
    if not row.get("target"):
        return ""
    t, s = row["target"], summary(row)
    limit = fmt_value(t["limit"], "g", row["unit"])
    return f"{SYMBOL[t['op']]} {limit}: met {s['met']}/{s['n']}"


def cells(row: dict) -> tuple[str, str, str]:
    """(median, range over the runs, target) of one row as table cells of docs/performance.md."""
    s, fmt, unit = summary(row), row["fmt"], row["unit"]
    runs = f"{s['n']} run{'s' if s['n'] != 1 else ''}"
    if "counts" in s:
        value, k = s["counts"][0]
        if len(s["counts"]) == 1:
            spread = f"same in {k}/{s['n']} runs" if s["n"] > 1 else runs
        else:
            spread = "; ".join(f"{v} in {c}/{s['n']}" for v, c in s["counts"])
        return value, spread, target_text(row)
    median = fmt_value(s["median"], fmt, unit)
    lo, hi = format(s["min"], fmt), fmt_value(s["max"], fmt, unit)
    if s["n"] == 1:
        spread = runs
    elif lo == format(s["max"], fmt):
        spread = f"same in {s['n']}/{s['n']} runs"
    else:
        spread = f"{lo}–{hi} ({runs})"
    return median, spread, target_text(row)


def table_rows(result: dict) -> list[str]:
    """The Markdown table rows (figure | median | range | target | command) of one script."""
    command = f"`{result['args_command']}`"
    rows = []
    for row in result["rows"]:
        median, spread, target = cells(row)
        line = " | ".join(c.replace("|", "\\|") for c in (row["what"], median, spread, target))
        rows.append(f"| {line} | {command} |")
    return rows


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version()}


def add_arguments(parser: argparse.ArgumentParser, repeats: int) -> None:
    """``--repeats`` (default ``repeats``) and ``--json`` (where the rows go)."""
    parser.add_argument("--repeats", type=int, default=repeats,
                        help=f"measure everything this many times (default {repeats})")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None,
                        help="write the rows here (default build/bench/<name>.json)")  # fmt: skip


class Bench:
    """Figures of one benchmark run over ``repeats`` repeats."""

    def __init__(self, name: str, block: str, repeats: int, json_path: Path | None = None):
        if repeats < 1:
            raise SystemExit(f"--repeats must be >= 1, got {repeats}")
        self.name, self.block, self.repeats = name, block, repeats
        self.json_path = json_path or OUT_DIR / f"{name}.json"
        self.figures: dict[str, Figure] = {}
        self.started = dt.datetime.now(dt.UTC)
        self.t0 = time.perf_counter()
        self.loads: list[float] = []

    def runs(self) -> Iterator[int]:
        """Repeat indices 0..repeats-1, announcing each with the 1-minute load average."""
        for i in range(self.repeats):
            self.loads.append(os.getloadavg()[0])
            print(f"\n== repeat {i + 1}/{self.repeats} (load average {self.loads[-1]:.2f}) ==",
                  flush=True)  # fmt: skip
            yield i
        self.loads.append(os.getloadavg()[0])

    def add(self, key: str, value: float | str, what: str, *, unit: str = "", fmt: str = ".3g",
            target: tuple[str, float] | None = None, short: str = "") -> None:  # fmt: skip
        """Record this repeat's ``value`` of figure ``key`` (described by the other arguments;
        ``target`` e.g. ``("<=", 10.0)``, ``short`` its name in the list of targets (docs/performance.md))."""
        if key not in self.figures:
            tgt = Target(target[0], float(target[1])) if target else None
            self.figures[key] = Figure(key, what, unit, fmt, tgt, short or what)
        if not isinstance(value, str):
            value = float(value)
        self.figures[key].values.append(value)

    def result(self) -> dict:
        argv, skip = [], False
        for a in sys.argv[1:]:  # the command as typed, without where its JSON went
            if not skip and not a.startswith("--json"):
                argv.append(a)
            skip = a == "--json"
        script = f"benchmarks/{Path(sys.argv[0]).name}"
        args_command = shlex.join([script, *argv])
        rows = []
        for f in self.figures.values():
            row = asdict(f)
            row["target"] = asdict(f.target) if f.target else None
            row["summary"] = summary(row)
            rows.append(row)
        return {
            "name": self.name,
            "block": self.block,
            "command": f"{PREFIX} {args_command}",
            "args_command": args_command,
            "started": self.started.isoformat(timespec="seconds"),
            "wall_s": round(time.perf_counter() - self.t0, 1),
            "repeats": self.repeats,
            "load": {"min": min(self.loads, default=0.0), "max": max(self.loads, default=0.0)},
            "machine": machine(),
            "rows": rows,
        }

    def finish(self) -> dict:
        """Print the README rows this run backs and write them as JSON; returns the result."""
        result = self.result()
        print(f"\n== figure rows ({self.repeats} repeats, {result['wall_s']:.0f} s, load average "
              f"{result['load']['min']:.1f}-{result['load']['max']:.1f}) ==")  # fmt: skip
        print("| figure | median | range | target | command |")
        print("\n".join(table_rows(result)))
        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        self.json_path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"rows written to {self.json_path}")
        return result

"""The parameter figures of a recovery run's exact answers, recomputed with today's evidence
(issue 26; no search):

    python benchmarks/drive_recovery_recheck.py --rows FILE.jsonl

Reads the rows ``drive_recovery.py search --rows FILE.jsonl`` wrote, regenerates each
machine's recording from the settings the row was searched with (its ``key``: seed, noise,
boxes, prefilter), and for every exact answer recomputes ``interval_check`` at the answer's
parameters and friction gain (the gain one more parameter when the search estimated it; the
fit's substeps when the row has them, else the step-size rule's). Prints each answer's values
outside their marginal and simultaneous 95 % intervals, and the search's interval figures
(``covered``, ``covered_joint``, ``covered_params``), so a run's figures follow a change of the
evidence without searching again."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._drive_machines import add_noise, draw_machine, preset_settings, simulate_machine
from benchmarks._recovery_checks import interval_check, interval_figures
from benchmarks._report import Bench, add_arguments


def exact_rows(path: str) -> list[dict]:
    """The rows of exact answers in a ``.jsonl`` rows file (lines cut short are skipped),
    each machine once (its last row)."""
    rows: dict[tuple, dict] = {}
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("relation") == "same" and "key" in row:
            rows[(json.dumps(row["key"], sort_keys=True), row["machine"])] = row
    return list(rows.values())


def recheck(row: dict) -> dict:
    """``row`` with its interval figures recomputed on today's evidence."""
    key = row["key"]
    rng = np.random.default_rng(key["seed"])
    for i in range(row["machine"] + 1):  # the machines are drawn in sequence
        m = draw_machine(rng, i)
        rec = add_noise(simulate_machine(m), key["noise_percent"], rng)
    gp = preset_settings(rec, key["boxes"] == "wide", key["prefilter"] == "spectrum",
                         position=True, population=key["population"],
                         generations=key["generations"])  # fmt: skip
    gain = row["gain"]
    gp = replace(gp, f_tanh=float(gain["f_tanh"]))
    truth = m.f_tanh if gain.get("estimated") else None
    return row | interval_check(m.structure, m.params, row["parameters"], rec, gp,
                                row.get("n_sub"), truth)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", required=True, help="a drive_recovery.py search rows file")
    add_arguments(parser, repeats=1)
    args = parser.parse_args(argv)
    if not Path(args.rows).is_file():
        parser.error(f"--rows {args.rows}: no such file")
    bench = Bench("drive_recovery-recheck", "drive-recovery", args.repeats, args.json)
    for _ in bench.runs():
        checked = []
        for row in sorted(exact_rows(args.rows), key=lambda r: r["machine"]):
            checked.append(recheck(row))
            r = checked[-1]
            print(f"  # {r['machine']} {r['kind']}: {len(r['param_errors'])} parameters; "
                  f"outside 95 % {', '.join(r['outside']) or '-'}; outside simultaneous "
                  f"{', '.join(r['outside_joint']) or '-'} (before: "
                  f"{', '.join(row['outside']) or '-'})", flush=True)  # fmt: skip
        interval_figures(bench, checked)
    bench.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

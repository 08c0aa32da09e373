"""The evidence for a drive answer (issue 26, part V), measured on simulated recordings.

    python benchmarks/drive_evidence.py [--runs 100] [--structure 1,5,6] [--noise-percent 1]
                                        [--named 2,5,6,7 --wrong 2,5,6 --named-runs 5]
                                        [--repeats 1] [--json PATH]

``coverage``: ``--runs`` recordings of ``--structure`` (the reference excitation, true values
off the nominals by ``TRUTH``, white velocity noise ``--noise-percent`` of the range, seeds
0..runs-1), each identified as the search refines a structure (its default settings without
the screening stage, the first start at the truth); prints per parameter how often the 95 %
interval covers the truth (binomial 99.99 % band for a correct procedure), the median
relative error, and how often the residual tests pass. ``named``: ``StructureFit`` of the true
structure ``--named`` and of a wrong one ``--wrong`` (one step simpler) on ``--named-runs``
noisy reference recordings of ``--named``: how often the rival table agrees with the truth,
and how often it names the truth when the wrong one was fitted. Prints rows for the README.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy import stats

from benchmarks._report import Bench, add_arguments
from models.drivetrain import reference_recording
from models.drivetrain.gp import GPSettings, IndividualSpec, as_arrays, identify
from models.drivetrain.structure_fit import StructureFit, fit_settings, structure_evidence
from models.drivetrain.submodels import parse_structure

#: true values off the kit's nominals (the nominals of the other parameters are the truth)
TRUTH = {"J1": 0.012, "M_C": 0.18, "f_v": 0.011, "J2": 0.018, "c1": 45.0, "M_S": 0.12}


def _recording(structure: str, seed: int, percent: float):
    names = {sp.name for k in parse_structure(structure) for sp in GPSettings().specs(k)}
    truth = {k: v for k, v in TRUTH.items() if k in names}
    clean = reference_recording(structure, overrides=truth)
    noise = 0.01 * percent * float(np.ptp(clean["velocity_rad_s"]))
    return reference_recording(structure, overrides=truth, noise=noise, seed=seed), truth


def coverage(structure: str, runs: int, percent: float, bench: Bench) -> None:
    settings = fit_settings(GPSettings(), n_starts=2)
    kinds = tuple(k.value for k in parse_structure(structure))
    hits: dict[str, int] = {}
    errors: dict[str, list[float]] = {}
    passed = 0
    t0 = time.perf_counter()
    for seed in range(runs):
        frame, truth = _recording(structure, seed, percent)
        full = {sp.name: truth.get(sp.name, sp.nominal) for k in kinds for sp in settings.specs(k)}
        data = as_arrays(frame)
        ev = identify(IndividualSpec(kinds, tuple(sorted(full.items()))), data, settings)
        evidence = structure_evidence(ev.structure, ev.parameters, data, settings)
        for p in evidence.parameters:
            hits[p.name] = hits.get(p.name, 0) + (p.lower <= full[p.name] <= p.upper)
            errors.setdefault(p.name, []).append(abs(p.value / full[p.name] - 1))
        passed += bool(evidence.residuals.passed)
    low, high = stats.binom.ppf([1e-4, 1 - 1e-4], runs, 0.95).astype(int)
    print(f"coverage of the 95 % intervals, {{{structure}}}, {percent:g} % noise, {runs} "
          f"recordings (a correct procedure: {low}..{high}); {time.perf_counter() - t0:.0f} s")  # fmt: skip
    for name, h in hits.items():
        med = statistics.median(errors[name])
        print(f"  {name}: {h}/{runs} covered, median |error| {100 * med:.3g} %")
        bench.add(f"coverage_{name}", h, f"95 % interval of {name} covers the truth, of {runs} "
                  f"recordings of {{{structure}}} ({low}..{high} for a correct procedure)",
                  fmt=".0f", target=(">=", int(low)))  # fmt: skip
    print(f"  residual tests (99 %) pass: {passed}/{runs}")
    bench.add(
        "residuals_pass",
        passed,
        f"residual tests pass for the true structure, of {runs}",
        fmt=".0f",
    )


def named(structure: str, wrong: str, runs: int, percent: float, bench: Bench) -> None:
    agree = caught = 0
    t0 = time.perf_counter()
    for seed in range(runs):
        frame, _ = _recording(structure, 100 + seed, percent)
        right = StructureFit(structure).fit(frame).evidence_
        bad = StructureFit(wrong).fit(frame).evidence_
        assert right.rivals is not None and bad.rivals is not None
        agree += right.rivals.agrees
        truth = tuple(k.code for k in parse_structure(structure))
        caught += bad.rivals.preferred == truth
        print(f"  seed {seed}: fit of the truth -> preferred {right.rivals.preferred}, "
              f"residuals {right.residuals.passed}; fit of {{{wrong}}} -> preferred "
              f"{bad.rivals.preferred}, residuals {bad.residuals.passed}", flush=True)  # fmt: skip
    print(f"rival table, {{{structure}}} data, {percent:g} % noise, {runs} recordings: the fit "
          f"of the truth preferred in {agree}/{runs}; a fit of {{{wrong}}} names the truth in "
          f"{caught}/{runs}; {time.perf_counter() - t0:.0f} s")  # fmt: skip
    bench.add(
        "rivals_agree",
        agree,
        f"rival table prefers the fitted truth {{{structure}}}, of {runs} recordings",
        fmt=".0f",
    )
    bench.add(
        "rivals_name_truth",
        caught,
        f"rival table of a fit of {{{wrong}}} names the truth, of {runs} recordings",
        fmt=".0f",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--structure", default="1,5,6")
    parser.add_argument("--noise-percent", type=float, default=1.0)
    parser.add_argument("--named", default="2,5,6,7")
    parser.add_argument("--wrong", default="2,5,6")
    parser.add_argument("--named-runs", type=int, default=5)
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    bench = Bench("drive_evidence", "drive", args.repeats, args.json)
    for _ in bench.runs():
        if args.runs:
            coverage(args.structure, args.runs, args.noise_percent, bench)
        if args.named_runs:
            named(args.named, args.wrong, args.named_runs, args.noise_percent, bench)
    bench.finish()


if __name__ == "__main__":
    main()

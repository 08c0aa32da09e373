"""Drive identifications: the work they do per second, to set a work limit that means seconds.

    python benchmarks/drive_work_rate.py [--repeats 1]

``IdentificationSettings.work_limit`` stops a fit by the state updates its simulations made
(``objective.Clock``: ``budget.SimulationCost.work`` per simulation, a Jacobian ``1 + n_p``
times), the same on any machine under any load, where the wall clock's ``time_limit_s`` (120 s
in a search) falls where the load puts it. To choose a work limit that stands for a time on a
given machine, this measures the rate (state updates per second of an identification's wall
time) of full identifications as the search's final stage runs them
(``finalists.final_settings``, the ``data`` preset from the recording's scales, 120 s limit):
on the reference excitation a backlash and a three-mass machine (noise-free ``drive simulate``
recordings) and on EMPS its answer {1,5,6,8} and a backlash structure (wrong there: the fit
that climbed to 4096 substeps and stopped at 120 s in ``drive_search.py emps --costliest``).
Each is identified twice and the second counted (its simulators compiled and cached: compile
time is no work). Printed: each case's work, wall time and rate, and the work limit that is
120 s at the slowest and at the median rate. Baseline of the same run: none (a rate, not a
ratio); the load average is printed with it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from models.drivetrain import reference_recording
from models.drivetrain.gp import objective
from models.drivetrain.gp.evaluate import IndividualSpec, identify
from models.drivetrain.gp.finalists import final_settings
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.scales import estimate_scales
from schemas.drive import emps_path, load_emps

#: (name, recording maker, structure)
CASES = (
    ("reference backlash", lambda: reference_recording(["two_mass", "coulomb", "backlash"]),
     ("two_mass", "coulomb", "backlash")),
    ("reference three-mass", lambda: reference_recording(
        ["three_mass", "viscous", "gravity", "delay"]), ("three_mass", "viscous", "gravity",
                                                          "delay")),
    ("EMPS {1,5,6,8}", lambda: load_emps(emps_path(), decimate=10),
     ("one_mass", "coulomb", "viscous", "gravity")),
    ("EMPS backlash", lambda: load_emps(emps_path(), decimate=10),
     ("two_mass", "coulomb", "viscous", "backlash")),
)  # fmt: skip
SECONDS = 120.0  # the search's time limit the work limit should stand for


def measured(rec, structure: tuple[str, ...]) -> tuple[float, float, bool]:
    """(work, wall seconds, stopped at a limit) of the full identification of ``structure`` on
    ``rec`` as the final stage runs it (the second of two: simulators cached)."""
    gp = final_settings(data_settings(estimate_scales(rec), position=True))
    spec = IndividualSpec(structure, (), refine=True)
    data = as_arrays(rec)
    charged: list[float] = []
    real = objective.Clock.charge

    def counting(self, work: float) -> None:
        charged.append(work)
        real(self, work)

    objective.Clock.charge = counting  # type: ignore[method-assign]
    try:
        identify(spec, data, gp)
        charged.clear()
        t0 = time.perf_counter()
        ev = identify(spec, data, gp)
        wall = time.perf_counter() - t0
    finally:
        objective.Clock.charge = real  # type: ignore[method-assign]
    return float(sum(charged)), wall, ev.timed_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser, repeats=1)
    args = parser.parse_args(argv)
    bench = Bench("drive_work_rate", "drive-work-rate", args.repeats, args.json)
    for _ in bench.runs():
        rates = []
        for name, make, structure in CASES:
            work, wall, stopped = measured(make(), structure)
            rates.append(work / wall)
            print(f"  {name} ({'+'.join(structure)}): {work:.3g} state updates in {wall:.1f} s"
                  f" = {rates[-1]:.3g} /s{' (stopped at a limit)' if stopped else ''}",
                  flush=True)  # fmt: skip
        bench.add("slowest", SECONDS * min(rates), f"drive fits: the work limit that is "
                  f"{SECONDS:g} s at the slowest case's rate", fmt=".3g")  # fmt: skip
        bench.add("median", SECONDS * statistics.median(rates), f"drive fits: the work limit "
                  f"that is {SECONDS:g} s at the median case's rate", fmt=".3g")  # fmt: skip
        bench.add("spread", max(rates) / min(rates), "drive fits: the fastest case's rate over "
                  "the slowest's (how far a work limit is from one time)", fmt=".3g")  # fmt: skip
    bench.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A recovery machine's friction-gain profile against the search's warm profile (issue 26,
docs/methods.md §2.8).

    PYTHONPATH=. .venv/bin/python benchmarks/drive_gain_profile.py [--seed 0] [--machine 9]
        [--factors 0.88,0.95,1,1.03,1.1] [--repeats 1] [--json PATH]

Machine ``--machine`` of ``drive_recovery``'s ``--seed`` (its recording with 0.5 % velocity
noise, simulated by ``solve_ivp`` outside the kit): its own structure identified from its true
parameters at the machine's gain times each of ``--factors``, as the search's final stage
identifies (``finalists.final_settings``: the profile, sharp or flat, that the stage must
find); then the final stage's warm profile (``friction_gain.warm_profile``) from the data
preset's gain, from the preset's nominal point. Figures: the warm profile's gain error against
the machine's and its RSS over the grid's best RSS (below 1: it found a lower point than the
grid). A machine without Coulomb or Stribeck friction has no gain to profile: refused.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from benchmarks._drive_machines import machine_recording, preset_settings
from benchmarks._report import Bench, add_arguments
from models.drivetrain.friction_gain import SMOOTHED, warm_profile
from models.drivetrain.gp.evaluate import IndividualSpec, identify
from models.drivetrain.gp.finalists import final_settings
from models.drivetrain.gp.recording import as_arrays

NOISE_PERCENT = 0.5  # drive_recovery's default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine", type=int, default=9)
    parser.add_argument("--factors", default="0.88,0.95,1,1.03,1.1")
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    factors = [float(f) for f in args.factors.split(",")]
    m, rec = machine_recording(args.seed, NOISE_PERCENT, args.machine)
    if not SMOOTHED & set(m.structure):
        parser.error(f"machine #{args.machine} ({m.kind}) has no Coulomb or Stribeck friction")
    data = as_arrays(rec)
    gp = final_settings(preset_settings(rec, True, False, position=True))
    truth = tuple(sorted(m.params.items()))
    print(f"#{args.machine} {m.kind}: gain {m.f_tanh:.4g}, the preset's {gp.f_tanh:.4g}")
    bench = Bench("drive_gain_profile", "drive", args.repeats, args.json)
    for _ in bench.runs():
        grid = []
        for f in factors:
            ev = identify(IndividualSpec(m.structure, truth, refine=True), data,
                          replace(gp, f_tanh=m.f_tanh * f), 0)  # fmt: skip
            grid.append(ev.rss)
            print(f"  truth at {f:g} x its gain ({m.f_tanh * f:.4g}): RSS {ev.rss:.4g}", flush=True)
        prof = warm_profile(IndividualSpec(m.structure, (), refine=True), data, gp, 0)
        steps = ", ".join(f"{g:.4g}: {r:.3g}" for g, r in prof.profile)
        print(f"  warm profile: gain {prof.f_tanh:.4g}, RSS {prof.evaluation.rss:.4g}, "
              f"{len(prof.profile)} fits ({steps})", flush=True)  # fmt: skip
        bench.add("gain_error", 100.0 * abs(prof.f_tanh / m.f_tanh - 1.0),
                  "warm profile: its gain against the machine's", unit="%", fmt=".2g")  # fmt: skip
        best = min((r for r in grid if math.isfinite(r)), default=math.nan)
        bench.add("rss_ratio", prof.evaluation.rss / best,
                  "warm profile: its RSS over the truth's best on the grid", fmt=".3g")  # fmt: skip
        bench.add("fits", float(len(prof.profile)), "warm profile: identifications", fmt=".0f")
    bench.finish()


if __name__ == "__main__":
    main()

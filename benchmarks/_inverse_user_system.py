"""A lab's own system runs as fast as the same system built in (issue 30, docs/models.md).

1. The planar overhead crane twice: the built-in ``planar_crane`` and the same physics written
   by a lab in the user protocol (energies, input forces, output; greylab derives the rest).
   BDF2, h = 1 ms, 8 s: the compiled solve (C, ``jit=True``) and the CasADi VM of both, and
   the ratio lab / built-in within each repeat (target <= 1.25: the same compiled path; the
   expressions differ only in how CasADi's graph of the derived terms is laid out).
2. The crank hoist of examples/crank_hoist at BDF2, 1 ms: the torque's error against its exact
   flat solution, relative to its peak (target <= 1e-4).

``benchmarks/inverse.py`` measures these after its own rows (README's inverse block); alone:
``PYTHONPATH=. .venv/bin/python benchmarks/_inverse_user_system.py [--repeats 3]`` (JSON in
``build/bench/inverse_user_system.json``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from methods.dae import solve_inverse
from models.underactuated import exact_solution, get_system
from models.underactuated.user import user_spec

ROOT = Path(__file__).resolve().parents[1]


class LabPlanarCrane:
    """The built-in planar crane (models/underactuated/cranes.py) from its energies."""

    name = "lab_planar_crane"
    description = "planar overhead crane written by a lab"
    coordinates = ("s", "l", "theta")
    controls = ("F", "M_w")
    outputs = ("x", "z")

    def __init__(self) -> None:
        self.parameters = {"m_t": 10.0, "m": 5.0, "r": 0.05, "J": 0.01, "g": 9.81}
        self.nominal = {"l": 2.0}
        self.bounds = {"l": (0.05, None)}
        self.default_demand = get_system("planar_crane").default_demand

    def kinetic_energy(self, q, v, p):
        l, th = q[1], q[2]
        dx = v[0] + v[1] * ca.sin(th) + l * ca.cos(th) * v[2]
        dz = -v[1] * ca.cos(th) + l * ca.sin(th) * v[2]
        return (0.5 * p["m_t"] * v[0] ** 2 + 0.5 * p["m"] * (dx**2 + dz**2)
                + 0.5 * p["J"] * (v[1] / p["r"]) ** 2)  # fmt: skip

    def potential_energy(self, q, p):
        return -p["m"] * p["g"] * q[1] * ca.cos(q[2])

    def input_forces(self, q, u, p):
        return [u[0], -u[1] / p["r"], 0]

    def output(self, q, p):
        return [q[0] + q[1] * ca.sin(q[2]), -q[1] * ca.cos(q[2])]


def _solve_times(system, jit: bool) -> tuple[float, float]:
    """(fastest solve of three more calls, compile time of the first) at BDF2, 1 ms: the
    machine is shared, the fastest call is the one least disturbed."""
    first = solve_inverse(system.problem, system.demand(), method="bdf2", dt=1e-3, jit=jit)
    walls = [
        solve_inverse(system.problem, system.demand(), method="bdf2", dt=1e-3, jit=jit).wall_time_s
        for _ in range(3)
    ]
    return min(walls), first.compile_time_s


def measure(bench: Bench) -> None:
    builtin = get_system("planar_crane")
    lab = user_spec(LabPlanarCrane(), "lab_planar_crane")()
    for jit, label in ((True, "compiled"), (False, "vm")):
        t_in, c_in = _solve_times(builtin, jit)
        t_lab, c_lab = _solve_times(lab, jit)
        print(f"planar crane 8 s, BDF2 1 ms, {label}: built-in {t_in:.3f} s (compile {c_in:.2f}"
              f" s), lab system {t_lab:.3f} s (compile {c_lab:.2f} s): ratio {t_lab / t_in:.2f}")  # fmt: skip
        what = "C-compiled" if jit else "CasADi VM"
        bench.add(f"{label}_builtin_s", t_in, f"planar crane, 8 s at BDF2 1 ms, {what}: built-in",
                  unit="s", fmt=".2f")  # fmt: skip
        bench.add(f"{label}_lab_s", t_lab, "same, written by a lab (energies)", unit="s",
                  fmt=".2f")  # fmt: skip
        bench.add(f"{label}_ratio", t_lab / t_in, f"ratio lab / built-in ({what}, same run)",
                  unit="×", fmt=".2f", target=("<=", 1.25),
                  short=f"lab system as fast as built-in ({what})")  # fmt: skip
    sys.path.insert(0, str(ROOT / "examples" / "crank_hoist"))
    hoist = get_system("crank_hoist:CrankHoist")
    r = solve_inverse(hoist.problem, hoist.demand(), method="bdf2", dt=1e-3, strict_rank=True)
    exact = exact_solution(hoist, None, r.table["t_s"].to_numpy())["tau"].to_numpy()
    rel = float(np.max(np.abs(r.table["tau"].to_numpy() - exact)) / np.max(np.abs(exact)))
    print(f"crank hoist, BDF2 1 ms: torque error / peak {rel:.1e} (target <= 1e-4)")
    bench.add("hoist_rel_error", rel, "crank hoist (examples/crank_hoist), BDF2 1 ms: torque "
              "error vs exact flat solution / peak", fmt=".1e", target=("<=", 1e-4),
              short="lab system controls within 1e-4 of the peak")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    bench = Bench("inverse_user_system", "inverse", args.repeats, args.json)
    for _ in bench.runs():
        measure(bench)
    bench.finish()


if __name__ == "__main__":
    main()

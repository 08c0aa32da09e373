"""Inverse dynamics benchmark (docs/methods.md §3).

1. Convergence orders of the controls against exact flat solutions (two-mass, planar crane):
   max error of the controls for h, h/2, h/4 and the observed orders log2(e_h / e_{h/2}).
2. Overhead trolley crane, 10 s at h = 1 ms (backward Euler): wall time of the compiled solver
   (compile time shown separately) and the ratio against a straightforward baseline:
   ``scipy.optimize.root`` per step on the same projected equations with finite-difference
   Jacobians (run on a shorter horizon and scaled linearly, as printed). The ratio is taken
   within each of ``--repeats`` repeats (each compiles the solver again).

3. A lab's own system (``benchmarks/_inverse_user_system.py``): the planar crane written from
   its energies vs the built-in one (solve times, ratio), the crank hoist example's accuracy.

Run: ``.venv/bin/python benchmarks/inverse.py [--repeats 3]`` (README rows at the end, JSON in
``build/bench/inverse.json``)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import root

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks import _inverse_user_system as lab_systems
from benchmarks._report import Bench, add_arguments
from methods.dae import Demand, solve_inverse
from methods.dae.inverse import consistent_start
from methods.dae.projection import choose_partition, projected_parts
from methods.dae.trajectories import SmoothStep
from models.underactuated import exact_solution, get_system


def orders() -> dict[str, float]:
    """Print the errors and observed orders; return per method the smallest observed order of
    the finest pair of step sizes over every system and control."""
    finest: dict[str, float] = {}
    print("== convergence of the controls (max abs error vs exact flat solution) ==")
    cases = [
        ("two_mass", {"x2": SmoothStep(0.0, 1.0, 0.5, 2.5, 13)}, 3.0, ["F"], (4e-3, 2e-3, 1e-3)),
        (
            "planar_crane",
            {"x": SmoothStep(0.0, 3.0, 1.0, 6.0, 13), "z": SmoothStep(-2.0, -1.5, 2.0, 6.0, 13)},
            7.0,
            ["F", "M_w"],
            (8e-3, 4e-3, 2e-3),
        ),
    ]
    for name, outs, t_end, ctrls, hs in cases:
        s = get_system(name)
        dem = Demand(outs, t_end=t_end)
        for method in ("euler", "bdf2", "radau"):
            errs = []
            for h in hs:
                r = solve_inverse(s.problem, dem, method=method, dt=h, jit=False)
                ex = exact_solution(s, dem, r.table["t_s"].to_numpy())
                errs.append([float(np.max(np.abs(ex[c] - r.table[c]))) for c in ctrls])
            e = np.array(errs)
            ords = np.log2(e[:-1] / e[1:])
            finest[method] = min(finest.get(method, np.inf), float(ords[-1].min()))
            for j, c in enumerate(ctrls):
                print(
                    f"{name:13s} {method:6s} {c:4s} errors "
                    + " ".join(f"{x:.3e}" for x in e[:, j])
                    + "  orders "
                    + " ".join(f"{o:.2f}" for o in ords[:, j])
                )
    return finest


def _baseline_steps(pb, demand, h, y_start, i0, n_steps):
    """Backward Euler on the same projected equations, scipy.optimize.root (hybr, FD Jacobian),
    from the state ``y_start = (q, v, u)`` at step ``i0``."""
    q0, v0, _ = consistent_start(pb, demand, 0.0)
    part = choose_partition(np.asarray(pb.fun_mats(q0, v0)[0]))
    parts = projected_parts(pb, part)
    n, _m = pb.n, pb.m

    def residual(y, qn, vn, t):
        q, v, u = y[:n], y[n : 2 * n], y[2 * n :]
        g = demand.evaluate(pb.output_names, np.array([t]), 2)[:, :, 0]
        qdot, H, hh, b, c = (np.asarray(x) for x in parts(q, v, u, g[0], g[2]))
        return np.r_[
            (q - qn) / h - qdot.ravel(), (H @ (v - vn) - h * hh.ravel()) / h, b.ravel(), c.ravel()
        ]

    y = np.asarray(y_start, float)
    for i in range(i0 + 1, i0 + n_steps + 1):
        sol = root(
            residual, y, args=(y[:n], y[n : 2 * n], i * h), method="hybr", options={"xtol": 1e-10}
        )
        # hybr with FD Jacobians stalls at times on this badly conditioned system: accept the
        # step when the residual is small anyway (the fair reading of "straightforward")
        if not sol.success and np.max(np.abs(sol.fun)) > 1e-6:
            raise RuntimeError(f"baseline failed at step {i}: {sol.message}")
        y = sol.x
    return y


def speed(bench: Bench) -> None:
    print("\n== overhead trolley crane, 10 s at h = 1 ms, backward Euler ==")
    s = get_system("trolley_crane")  # a fresh problem: compiles again in every repeat
    dem = s.demand()
    t = time.perf_counter()
    r = solve_inverse(s.problem, dem, method="euler", dt=1e-3, t_end=10.0, jit=True)
    first = time.perf_counter() - t
    wall = solve_inverse(s.problem, dem, method="euler", dt=1e-3, t_end=10.0, jit=True).wall_time_s
    print(
        f"compiled solver: first call {first:.2f} s (compile {r.compile_time_s:.2f} s), solve "
        f"{wall:.3f} s (second call), steps {r.n_steps}, "
        f"max servo violation {r.max_constraint_violation:.1e}, Newton {r.newton_iterations}"
    )
    r_vm = solve_inverse(s.problem, dem, method="euler", dt=1e-3, t_end=10.0, jit=False)
    print(f"CasADi VM (no C compilation): solve {r_vm.wall_time_s:.3f} s")
    # the baseline is slow: 250 steps from the solver's state at t = 3 s (load in motion),
    # scaled linearly to the 10000 steps (the cost per step is roughly constant)
    pb, i0, n_base = s.problem, 3000, 250
    cols = list(pb.coordinate_names + pb.velocity_names + pb.control_names)
    t = time.perf_counter()
    yb = _baseline_steps(pb, dem, 1e-3, r.table[cols].iloc[i0].to_numpy(), i0, n_base)
    tb = time.perf_counter() - t
    tb_full = tb * r.n_steps / n_base
    diff = np.max(np.abs(yb - r.table[cols].iloc[i0 + n_base].to_numpy()))
    print(
        f"baseline scipy.optimize.root + FD Jacobians: {n_base} steps (t = 3.00..3.25 s) in "
        f"{tb:.2f} s -> {tb_full:.1f} s for 10 s (scaled x{r.n_steps / n_base:g}); "
        f"agrees with the compiled solver to {diff:.1e} in (q, v, u)"
    )
    print(
        f"ratio baseline / compiled solver: {tb_full / wall:.0f}x (target >= 30x); "
        f"baseline / VM: {tb_full / r_vm.wall_time_s:.0f}x; target wall <= 1 s: "
        f"{'met' if wall <= 1.0 else 'NOT met'}"
    )
    crane = "trolley crane, 10 s at h = 1 ms, backward Euler"
    bench.add("solve_s", wall, f"{crane}: compiled solve", unit="s", fmt=".2f",
              target=("<=", 1.0), short="trolley crane compiled solve")  # fmt: skip
    bench.add("compile_s", r.compile_time_s, "same, one-off C compilation", unit="s", fmt=".1f")
    bench.add("vm_s", r_vm.wall_time_s, "same, CasADi VM (no compilation)", unit="s", fmt=".2f")
    bench.add("baseline_s", tb_full, f"baseline: `scipy.optimize.root` per step, finite-"
              f"difference Jacobians ({n_base} steps, scaled ×{r.n_steps / n_base:g})",
              unit="s", fmt=".0f")  # fmt: skip
    bench.add("ratio", tb_full / wall, "ratio baseline / compiled solve (same run)", unit="×",
              fmt=".0f", target=(">=", 30.0),
              short="trolley crane ratio over scipy root")  # fmt: skip
    bench.add("violation", r.max_constraint_violation, "max servo-constraint violation",
              fmt=".1e")  # fmt: skip
    bench.add("agree", diff, "baseline and solver agree to (largest difference in q, v, "
              f"u after the {n_base} steps)", fmt=".0e")  # fmt: skip


def measure(bench: Bench) -> None:
    finest = orders()
    names = {"euler": "backward Euler", "bdf2": "BDF2", "radau": "Radau IIA"}
    bench.add("orders", ", ".join(f"{names[m]} {o:.2f}" for m, o in finest.items()),
              "observed order of the controls vs exact flat solutions (degree-13 demands; "
              "two_mass, planar_crane; finest step pair, smallest over the controls)")  # fmt: skip
    speed(bench)
    lab_systems.measure(bench)  # a lab's own system vs built in (issue 30): rows after these


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    bench = Bench("inverse", "inverse", args.repeats, args.json)
    for _ in bench.runs():
        measure(bench)
    bench.finish()


if __name__ == "__main__":
    main()

"""Drive-train simulators: C optimisation level against the work of one simulation.

    python benchmarks/drive_jit.py [--repeats 1]

For EMPS structures at 100 Hz (the recording's own scales, so the substep count of the data
preset; the head of the record as screening sees it and the whole record), each compiled with
``-O0`` (tcc when installed, the default for light simulators) and with ``-O1`` (cc), each in a
fresh disk cache: compile time, one simulation with sensitivities (median of 5) and the net
gain of ``-O1`` over an identification of ten Jacobians (a measured average of a search:
``drive_profile.py profile --target emps`` prints Jacobians and compiles). The work
``n_sub (N - 1) nx (1 + n_p)`` is what ``models.drivetrain.simulate.optimisation`` compares with
``OPTIMISE_WORK``: the gain should change sign near it. The ratio ``-O0``/``-O1`` of the
heaviest simulator's Jacobian is the figure kept in README. Baseline of the same run: the
substeps unrolled into one expression (the simulator before 2026-12-05, rebuilt here at ``-O0``,
same ``mapaccum`` over the record): its Jacobian against the loop's at ``-O0``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._report import Bench, add_arguments
from models.drivetrain import assemble
from models.drivetrain.gap import gap_substep, rk4
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.jit import compiled_many
from models.drivetrain.scales import estimate_scales
from models.drivetrain.simulate import OPTIMISE_WORK, compile_simulator
from models.drivetrain.substeps import substeps
from schemas.drive import emps_path, load_emps

STRUCTURES = (
    "one_mass,coulomb,viscous,gravity",
    "one_mass,coulomb,viscous,stribeck",
    "two_mass,coulomb,viscous,gravity",
    "three_mass,coulomb,viscous,stribeck",
    "two_mass,backlash,coulomb,viscous",
)
JACOBIANS = 10


def timed(model, u: np.ndarray, dt: float, opt: str) -> tuple[float, float, int]:
    """(compile s, Jacobian s, n_sub) of ``model`` on ``u`` at ``opt`` in a fresh disk cache."""
    p = np.array([s.nominal for s in model.specs])
    with tempfile.TemporaryDirectory(prefix="greylab-jit-") as cache:
        os.environ["GREYLAB_JIT_CACHE"] = cache
        t0 = time.perf_counter()
        sim = compile_simulator(model, u.size, dt, jit=True, opt=opt)
        compile_s = time.perf_counter() - t0
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            sim.simulate_with_jacobian(p, u, 0.0)
            runs.append(time.perf_counter() - t0)
    return compile_s, statistics.median(runs), sim.n_sub


def unrolled(model, u: np.ndarray, dt: float) -> float:
    """Jacobian seconds (median of 5) with the substeps unrolled (no delay), ``-O0``."""
    n_sub, (x, p), nx = substeps(model, dt), (model.x, model.p), model.x.size1()
    fx, u01, xk, h = (
        ca.Function("fx", [x, model.u, p], [model.rhs()]),
        ca.SX.sym("u01", 2),
        x,
        dt / n_sub,
    )
    for j in range(n_sub):  # the same substep as the simulator's (with backlash: gap.py's)
        u3 = ca.vertcat(*(u01[0] + (u01[1] - u01[0]) * (s / n_sub) for s in (j, j + 0.5, j + 1)))
        if model.f_free is not None:
            xk = gap_substep(model, fx, xk, u3, h)
        else:
            xk = rk4(fx, xk, [u3[0], u3[1], u3[2]], p, h)
    sens = ca.SX.sym("S", nx, p.size1())
    sens_next = ca.mtimes(ca.jacobian(xk, x), sens) + ca.jacobian(xk, p)
    with tempfile.TemporaryDirectory(prefix="greylab-jit-") as cache:
        os.environ["GREYLAB_JIT_CACHE"] = cache
        (aug,) = compiled_many([ca.Function("rk4s", [ca.vertcat(x, ca.vec(sens)), u01, p],
                                            [ca.vertcat(xk, ca.vec(sens_next))])])  # fmt: skip
        P, U = ca.MX.sym("p", p.size1()), ca.MX.sym("u", u.size)
        X = aug.mapaccum("rolls", u.size - 1)(ca.MX.zeros(nx * (1 + p.size1())),
                                               ca.horzcat(U[:-1], U[1:]).T, P)  # fmt: skip
        fun, p0 = ca.Function("simjac", [P, U], [X]), [s.nominal for s in model.specs]
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            fun(p0, u)
            runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def measure(bench: Bench) -> None:
    rec = load_emps(emps_path(), decimate=10)
    gp = data_settings(estimate_scales(rec), position=True)
    u, dt = rec["torque_Nm"].to_numpy(), float(rec["t_s"].iloc[1] - rec["t_s"].iloc[0])
    kit = {"nominals": dict(gp.nominals), "bounds": dict(gp.bounds), "f_tanh": gp.f_tanh}
    print(f"{'structure':38s} {'N':>5s} {'n_sub':>5s} {'work':>7s} {'-O0 compile/jac':>16s} "
          f"{'-O1 compile/jac':>16s} {'gain@10':>8s}  (OPTIMISE_WORK {OPTIMISE_WORK:.0e})")  # fmt: skip
    for structure in STRUCTURES:
        model = assemble(structure.split(","), **kit)
        nx, n_p = model.x.size1(), model.p.size1()
        for n in (u.size // 2, u.size):
            c0, j0, n_sub = timed(model, u[:n], dt, "-O0")
            c1, j1, _ = timed(model, u[:n], dt, "-O1")
            work = n_sub * (n - 1) * nx * (1 + n_p)
            gain = JACOBIANS * (j0 - j1) - (c1 - c0)
            print(f"{structure:38s} {n:5d} {n_sub:5d} {work / 1e6:6.2f}M {c0:6.2f}s/{j0 * 1e3:6.1f}ms "
                  f"{c1:6.2f}s/{j1 * 1e3:6.1f}ms {gain:+7.2f}s")  # fmt: skip
    bench.add("jac_ratio", j0 / j1, f"Jacobian -O0/-O1, {STRUCTURES[-1]}, EMPS 100 Hz", unit="×",
              fmt=".1f")  # fmt: skip
    j_unrolled = unrolled(model, u, dt)
    print(f"{STRUCTURES[-1]}: unrolled substeps {j_unrolled * 1e3:.1f} ms per Jacobian at -O0, "
          f"loop {j0 * 1e3:.1f} ms: {j_unrolled / j0:.1f}x")  # fmt: skip
    bench.add("loop_ratio", j_unrolled / j0, f"Jacobian unrolled/loop substeps at -O0, "
              f"{STRUCTURES[-1]}, EMPS 100 Hz", unit="×", fmt=".1f")  # fmt: skip
    bench.add("compile_extra_s", c1 - c0, f"extra compile of -O1, {STRUCTURES[-1]}", unit="s",
              fmt=".2f")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=1)
    args = parser.parse_args()
    bench = Bench("drive_jit", "drive", args.repeats, args.json)
    for _ in bench.runs():
        measure(bench)
    bench.finish()


if __name__ == "__main__":
    main()

"""Drive-train identification: where a structure search spends its time, and one
identification against a naive solve_ivp + finite-difference baseline.

    python benchmarks/drive_profile.py profile  [--population 10 --generations 10 --seed 0]
                                                [--target reference|emps] [--through-cli]
    python benchmarks/drive_profile.py baseline [--stage screen|full --start-scale 1.5]
                                                [--naive-max-nfev N --naive-timeout 600]

``profile``: one ``StructureSearch(...).fit`` in this process, serial, cold caches (``emps``: the
record at 100 Hz, settings from its own scales as a user's). Timers patched (here only) around
``simulate.compile_simulator`` (of which ``jit.compiled_many``: C code generation + compiler),
``CompiledSimulator.simulate`` and ``.simulate_with_jacobian`` and ``least_squares`` as called from
``gp.solve``: its own time = total - the simulations inside it (= the objective's
prefilter/scaling + scipy's TRF). "other" = wall - (compile + simulate + jacobian + least-squares
own): GP operators, model assembly, the result's model. Not measured in-process:
Prefect/Dask/threads, MLflow, interpreter start, idle workers. ``--through-cli`` also times
``greylab drive identify`` (same size and seed, ``--no-cache --no-register-model --json``,
``--cli-workers``, default 1 so the work is the same) in a subprocess with ``GREYLAB_HOME`` and the
JIT cache in a temp folder: "orchestration" = its wall - the in-process wall.

``baseline``: {two_mass, coulomb, viscous, stribeck} on ``reference_recording()``. greylab:
``identify`` with ``GPSettings()`` (``--stage full``, the default: ``screen_nfev = 0``, the whole
record; ``screen``: the first stage on the record's head, which the naive fit also gets), compiled
first, then identified twice: cold = compile + the first identify, warm = the second. The record is
simulated at the nominals (an exact start), so the start is ``--start-scale`` x the nominals.
Naive: the CasADi right-hand side ``Function(x, u, p)`` called pointwise from Python in
``solve_ivp`` (RK45 or LSODA, scipy's default tolerances unless ``--naive-rtol``, torque by linear
interpolation, output dq1 at the sample times, at rest with every inertia at y[0]),
``least_squares`` TRF, scipy's '2-point' Jacobian (``--naive-diff-step``); same box coordinates,
starts (``evaluate._starts``), budget, tolerances, 25 Hz prefilter and floor stop. With
``--naive-max-nfev`` below greylab's budget the target is per evaluation. ``--repeats N``
(default 1): medians and ranges, JSON in build/bench/drive_profile-<mode>.json.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import casadi as ca
import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares
from scipy.optimize._numdiff import approx_derivative  # what jac='2-point' runs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import models.drivetrain.gp.evaluate as evaluate
import models.drivetrain.jit as jit
from benchmarks._report import Bench, add_arguments
from methods.blas import single_threaded_blas
from models.drivetrain import assemble, reference_recording
from models.drivetrain.gp import GPSettings, IndividualSpec, StructureSearch, as_arrays, solve
from models.drivetrain.gp.evaluate import RecordingArrays
from models.drivetrain.gp.objective import Objective, capped
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.signals import lowpass
from models.drivetrain.scales import estimate_scales
from schemas.drive import emps_path, load_emps

simulate = importlib.import_module("models.drivetrain.simulate")  # the module, not the function

TRUTH = ("two_mass", "coulomb", "viscous", "stribeck")


class Timers:
    """Calls and seconds per key; ``wrap`` also records the time spent in ``inner`` keys
    during each call (as ``<key>:inner``)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, key: str, fn: Callable, inner: tuple[str, ...] = ()) -> Callable:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            before = sum(self.seconds[k] for k in inner)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.calls[key] += 1
                self.seconds[key] += time.perf_counter() - t0
                if inner:
                    self.seconds[f"{key}:inner"] += sum(self.seconds[k] for k in inner) - before

        return timed


@contextmanager
def instrumented(t: Timers) -> Iterator[Timers]:
    """Timers around the simulator, its compilation and the least-squares solver (restored)."""
    sim, obj = simulate.CompiledSimulator, Objective
    targets = [(simulate, "compile_simulator", "compile", ()), (jit, "compiled_many", "cc", ()),
               (sim, "simulate", "simulate", ()), (sim, "simulate_with_jacobian", "jacobian", ()),
               (obj, "residual", "residual", ()), (obj, "jacobian", "objective_jac", ()),
               (solve, "least_squares", "lsq", ("simulate", "jacobian"))]  # fmt: skip
    with ExitStack() as stack:
        for owner, name, key, inner in targets:
            timed = t.wrap(key, getattr(owner, name), inner)
            stack.enter_context(mock.patch.object(owner, name, timed))
        yield t


@contextmanager
def cold_cache() -> Iterator[str]:
    """An empty ``GREYLAB_JIT_CACHE`` and empty in-memory simulator caches."""
    with tempfile.TemporaryDirectory(prefix="greylab-jit-") as tmp:
        simulate._CACHE.clear()
        simulate._REQUESTS.clear()
        with mock.patch.dict(os.environ, {"GREYLAB_JIT_CACHE": tmp}):
            yield tmp


def components(t: Timers, wall: float) -> list[tuple[str, str, int, float]]:
    """(key, label, calls, seconds) of the table; labels starting with two spaces are parts
    of the row above and not in the sum."""
    s, c = t.seconds, t.calls
    objective = s["residual"] + s["objective_jac"]  # always inside least_squares
    own = s["lsq"] - s["lsq:inner"]  # least_squares minus the simulations inside it
    other = wall - s["compile"] - s["simulate"] - s["jacobian"] - own
    n_obj, obj_own = c["residual"] + c["objective_jac"], objective - s["lsq:inner"]
    return [
        ("wall", "whole search (in-process, serial)", 1, wall),
        ("compile", "compile_simulator (incl. C compile)", c["compile"], s["compile"]),
        ("cc", "  of which C code generation + cc", c["cc"], s["cc"]),
        ("simulate", "simulate (plain)", c["simulate"], s["simulate"]),
        ("jacobian", "simulate_with_jacobian", c["jacobian"], s["jacobian"]),
        ("lsq_own", "least_squares own (total - sims)", c["lsq"], own),
        ("objective", "  of which objective (prefilter etc.)", n_obj, obj_own),
        ("trf", "  of which scipy TRF", c["lsq"], s["lsq"] - objective),
        ("other", "other (GP, assembly, bookkeeping)", 0, other),
    ]


def through_cli(args) -> tuple[float, float, str]:
    """Wall of ``greylab drive identify`` (cold JIT cache), of its ``--help``, its structure."""
    greylab = str(Path(sys.executable).parent / "greylab")
    cmd = [greylab, "drive", "identify", "--population", str(args.population), "--generations",
           str(args.generations), "--seed", str(args.seed), "--no-cache", "--json",
           "--no-register-model", "--workers", str(args.cli_workers), "--runner", args.cli_runner]  # fmt: skip
    if args.target == "emps":
        cmd += ["--data", str(emps_path()), "--emps-decimate", "10"]
    with tempfile.TemporaryDirectory(prefix="greylab-cli-") as tmp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "MLFLOW_", "GREYLAB_"))}  # fmt: skip
        env.update(GREYLAB_HOME=f"{tmp}/home", GREYLAB_JIT_CACHE=f"{tmp}/jit")
        t0 = time.perf_counter()
        subprocess.run([greylab, "drive", "identify", "--help"], env=env, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        startup = time.perf_counter() - t0
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    try:
        found = json.loads(done.stdout).get("best_codes", "?")
    except (ValueError, AttributeError):  # not JSON
        found = "?"
    return wall, startup, str(found)


def profile(args, bench: Bench) -> None:
    size = {"population": args.population, "generations": args.generations}
    gp, rec = GPSettings(**size), reference_recording()
    if args.target == "emps":  # searched from its own scales, as a user's recording
        rec = load_emps(emps_path(), decimate=10)
        gp = data_settings(estimate_scales(rec), position=True, **size)
    timers = Timers()
    with cold_cache(), instrumented(timers):
        t0 = time.perf_counter()
        search = StructureSearch(gp.population, gp.generations, args.seed, settings=gp).fit(rec)
        wall = time.perf_counter() - t0
    codes = "{" + ",".join(map(str, search.best_codes_)) + "}"
    print(f"{args.target}: {args.population} x {args.generations}, seed {args.seed}, serial, "
          f"cold compile cache: {codes} in {wall:.1f} s ({search.n_evaluations_} "
          "identifications)")  # fmt: skip
    rows = components(timers, wall)
    print(f"{'component':42s} {'calls':>7s} {'seconds':>9s} {'share':>7s}")
    for _, label, calls, seconds in rows:
        print(f"{label:42s} {calls:7d} {seconds:9.2f} {seconds / wall:7.1%}")
    size = f"{args.target} {args.population} × {args.generations}, seed {args.seed}"
    for key, label, calls, seconds in rows:
        what = f"{label.strip()} ({size}, in-process)" if key == "wall" else label.strip()
        bench.add(f"{key}_s", seconds, what, unit="s", fmt=".2f")
        if key in ("compile", "cc", "simulate", "jacobian", "lsq_own"):
            bench.add(f"{key}_calls", calls, f"{label.strip()}: calls", fmt=".0f")
        if key != "wall":
            bench.add(f"{key}_share", 100 * seconds / wall, f"{label.strip()}: share of wall",
                      unit="%", fmt=".1f")  # fmt: skip
    bench.add("result", codes, "structure found")
    if args.through_cli:
        cli, startup, found = through_cli(args)
        print(f"greylab drive identify ({args.cli_workers} worker(s), {args.cli_runner}): "
              f"{cli:.1f} s, found {found}; start-up (--help) {startup:.1f} s; orchestration "
              f"(CLI - in-process) {cli - wall:.1f} s = {(cli - wall) / wall:.1%} of the "
              "in-process wall")  # fmt: skip
        bench.add("cli_s", cli, f"greylab drive identify, {args.cli_workers} worker(s)",
                  unit="s", fmt=".1f")  # fmt: skip
        bench.add("startup_s", startup, "greylab drive identify --help", unit="s", fmt=".1f")
        bench.add("orchestration_s", cli - wall, "orchestration (CLI - in-process)", unit="s",
                  fmt=".1f")  # fmt: skip


class _Timeout(Exception):
    pass


class Naive:
    """The same least-squares problem as ``objective.Objective`` (no position error) with the
    CasADi right-hand side called pointwise from ``solve_ivp``; the Jacobian by scipy's own
    '2-point' differences (``approx_derivative``, what ``jac="2-point"`` runs), called here
    so that residual evaluations, Jacobians and simulations are counted apart."""

    def __init__(self, model, data, ident, args, deadline: float) -> None:
        self.f = ca.Function("f", [model.x, model.u, model.p], [model.rhs()])
        self.lower = np.array([s.lower for s in model.specs])
        self.width = np.array([s.upper - s.lower for s in model.specs])
        self.t, self.u = np.arange(data.n) * data.dt, data.u
        self.method, self.deadline = args.naive_method, deadline
        self.tol = {"rtol": args.naive_rtol} if args.naive_rtol else {}
        self.step = args.naive_diff_step
        names = model.state_names
        self.x0 = np.array([data.y[0] if n.startswith("dq") else 0.0 for n in names])
        self.out = names.index("dq1")
        filt = lowpass(ident.prefilter_hz, data.dt)
        self.keep = filt if filt is not None else (lambda a: a)
        self.yf = self.keep(data.y)
        self.scale = float(np.sqrt(np.sum((self.yf - self.yf.mean()) ** 2)) + 1e-300)
        self.nsim = self.nres = self.njac = 0
        self.best_cost, self.last_z, self.last_r = np.inf, np.empty(0), np.empty(0)

    def simulate(self, p: np.ndarray) -> np.ndarray:
        f, t, u = self.f, self.t, self.u

        def rhs(tt: float, x: np.ndarray) -> np.ndarray:
            return np.asarray(f(x, np.interp(tt, t, u), p)).ravel()

        self.nsim += 1
        sol = solve_ivp(rhs, (t[0], t[-1]), self.x0, method=self.method, t_eval=t, **self.tol)
        return sol.y[self.out] if sol.success else np.full(t.size, np.nan)

    def _r(self, z: np.ndarray) -> np.ndarray:
        if time.perf_counter() > self.deadline:
            raise _Timeout
        r = (self.keep(self.simulate(self.lower + self.width * z)) - self.yf) / self.scale
        return capped(r)

    def residual(self, z: np.ndarray) -> np.ndarray:
        self.nres += 1
        r = self._r(z)
        self.best_cost = min(self.best_cost, float(r @ r))
        self.last_z, self.last_r = z.copy(), r
        return r

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        self.njac += 1
        same = np.array_equal(z, self.last_z)
        f0 = self.last_r if same else self._r(z)
        return approx_derivative(self._r, z, method="2-point", f0=f0, bounds=(0.0, 1.0),
                                 rel_step=self.step)  # fmt: skip


def naive_fit(naive: Naive, starts, max_nfev: int, ident) -> dict:
    """``solve.minimise`` on the naive problem: wall, RSS, counts, timed out."""
    timed_out, t0, run = False, time.perf_counter(), 0
    with single_threaded_blas():
        for z0 in starts:
            if ident.stop_at_floor and naive.best_cost <= evaluate.FLOOR:
                break
            run += 1
            try:
                least_squares(naive.residual, z0, jac=naive.jacobian, bounds=(0.0, 1.0),
                              method="trf", max_nfev=max_nfev, ftol=ident.ftol,
                              xtol=ident.xtol, gtol=ident.gtol, x_scale=1.0)  # fmt: skip
            except _Timeout:
                timed_out = True
                break
    return {"wall": time.perf_counter() - t0, "rss": naive.best_cost * naive.scale**2,
            "sims": naive.nsim, "nfev": naive.nres, "njev": naive.njac, "starts": run,
            "timed_out": timed_out}  # fmt: skip


def greylab_fit(spec: IndividualSpec, data, gp: GPSettings, seed: int) -> dict:
    """Compile (cold caches), ``identify`` once (cold) and again (warm): times, RSS, counts."""
    ident, timers, walls = gp.identification, Timers(), []
    options = {"jit": ident.jit, "jit_opt": ident.jit_opt, "jit_after": ident.jit_after}
    with cold_cache():
        t0 = time.perf_counter()
        sim = simulate.get_simulator(spec.structure, data.n, data.dt, **options,
                                     **gp.kit_options())  # fmt: skip
        compile_s = time.perf_counter() - t0
        for _ in range(2):
            timers = Timers()
            with instrumented(timers):
                t0 = time.perf_counter()
                ev = evaluate.identify(spec, data, gp, seed)
                walls.append(time.perf_counter() - t0)
    return {"wall": walls[1], "first": walls[0], "compile": compile_s, "rss": ev.rss_train,
            "sims": ev.nfev, "nfev": timers.calls["residual"], "starts": timers.calls["lsq"],
            "njev": timers.calls["objective_jac"], "sim": sim, "timed_out": ev.timed_out,
            "params": np.array(list(ev.parameters.values()))}  # fmt: skip


def baseline(args, bench: Bench) -> None:
    gp = GPSettings()
    if args.stage == "full":
        gp = replace(gp, identification=replace(gp.identification, screen_nfev=0))
    ident, data = gp.identification, as_arrays(reference_recording())
    specs = assemble(TRUTH, **gp.kit_options()).specs
    spec = IndividualSpec(TRUTH, tuple((s.name, args.start_scale * s.nominal) for s in specs))
    g = greylab_fit(spec, data, gp, args.seed)
    n_res = evaluate.screened_samples(data.n, ident)  # the screening fits the record's head
    head = RecordingArrays(data.u[:n_res], data.y[:n_res], data.dt,
                           None if data.q is None else data.q[:n_res])  # fmt: skip
    naive = Naive(g["sim"].model, head, ident, args, time.perf_counter() + args.naive_timeout)
    z_start = np.clip((np.array([v for _, v in spec.start]) - naive.lower) / naive.width, 0, 1)
    starts, max_nfev = evaluate._starts(spec, ident, z_start, args.seed)
    budget = min(max_nfev, args.naive_max_nfev or max_nfev)
    n = naive_fit(naive, starts, budget, ident)
    naive.deadline = np.inf
    r = naive._r((g["params"] - naive.lower) / naive.width)
    floor, cold = float(r @ r) * naive.scale**2, g["compile"] + g["first"]
    print(f"{len(starts)} starts, max_nfev {max_nfev} (greylab) / {budget} (naive "
          f"{args.naive_method}{', TIMED OUT' if n['timed_out'] else ''}); start "
          f"{args.start_scale} x nominal, {args.stage} stage, prefilter {ident.prefilter_hz} Hz")  # fmt: skip
    print(f"{'':30s} {'greylab':>11s} {'naive':>11s}")
    for label, key, f in (("identification wall [s]", "wall", ".3f"), ("final RSS", "rss", ".4g"),
                          ("starts run", "starts", "d"), ("residual evaluations", "nfev", "d"),
                          ("Jacobians", "njev", "d"), ("simulations (incl. FD/sens.)", "sims",
                          "d")):  # fmt: skip
        print(f"{label:30s} {g[key]:11{f}} {n[key]:11{f}}")
    print(f"greylab: compile {g['compile']:.2f} s, first identify {g['first']:.3f} s, cold "
          f"{cold:.2f} s; RSS of greylab's result in the naive simulator {floor:.4g}")  # fmt: skip
    ratio, ratio_cold = n["wall"] / g["wall"], n["wall"] / cold
    per_eval = (n["wall"] / max(n["nfev"], 1)) / (g["wall"] / max(g["nfev"], 1))
    bounded = budget < max_nfev or n["timed_out"]
    print(f"naive / greylab: {ratio:.1f}x warm, {ratio_cold:.1f}x cold, {per_eval:.1f}x per "
          f"residual evaluation{' (naive BOUNDED: compare per evaluation)' if bounded else ''}")  # fmt: skip
    what = f"{{2,5,6,7}}, reference record, {args.stage} stage, start {args.start_scale} × nominal"
    add = bench.add
    add("greylab_s", g["wall"], f"greylab identify, warm ({what})", unit="s", fmt=".3f")
    add("compile_s", g["compile"], "greylab compile (cold JIT cache)", unit="s", fmt=".2f")
    add("cold_s", cold, "greylab compile + first identify", unit="s", fmt=".2f")
    add("naive_s", n["wall"], f"naive solve_ivp {args.naive_method} + 2-point TRF, max_nfev "
        f"{budget}{' (timed out)' if n['timed_out'] else ''}", unit="s", fmt=".2f")  # fmt: skip
    add("ratio", ratio, "naive / greylab wall (warm)" + (", naive bounded" if bounded else ""),
        unit="×", fmt=".1f", target=None if bounded else (">=", 20.0))  # fmt: skip
    add("ratio_cold", ratio_cold, "naive / greylab wall (cold)", unit="×", fmt=".1f")
    add("ratio_per_eval", per_eval, "naive / greylab wall per residual evaluation", unit="×",
        fmt=".1f", target=(">=", 20.0) if bounded else None)  # fmt: skip
    for who, d in (("greylab", g), ("naive", n)):
        add(f"rss_{who}", d["rss"], f"final RSS, {who}", fmt=".4g")
        add(f"nfev_{who}", d["nfev"], f"residual evaluations, {who}", fmt=".0f")
        add(f"sims_{who}", d["sims"], f"simulations, {who}", fmt=".0f")
    add("rss_floor", floor, "RSS of greylab's result in the naive simulator", fmt=".4g")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["profile", "baseline"])
    parser.add_argument("--population", type=int, default=10)
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", choices=["reference", "emps"], default="reference")
    parser.add_argument("--through-cli", action="store_true", help="profile: also the CLI")
    parser.add_argument("--cli-workers", type=int, default=1)
    parser.add_argument("--cli-runner", choices=["thread", "dask"], default="thread")
    parser.add_argument("--stage", choices=["screen", "full"], default="full")
    parser.add_argument("--start-scale", type=float, default=1.5)
    parser.add_argument("--naive-method", choices=["RK45", "LSODA"], default="RK45")
    parser.add_argument("--naive-rtol", type=float, default=None, help="default: scipy's")
    parser.add_argument("--naive-diff-step", type=float, default=None, help="default: scipy's")
    parser.add_argument("--naive-max-nfev", type=int, default=None)
    parser.add_argument("--naive-timeout", type=float, default=600.0)
    add_arguments(parser, repeats=1)
    args = parser.parse_args(argv)
    bench = Bench(f"drive_profile-{args.mode}", "drive", args.repeats, args.json)
    for _ in bench.runs():
        {"profile": profile, "baseline": baseline}[args.mode](args, bench)
    bench.finish()


if __name__ == "__main__":
    main()

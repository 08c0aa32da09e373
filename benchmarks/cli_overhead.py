"""The platform's overhead below the work: CLI studies against the same work in-process (issue 31).

Press: ``greylab press detect --model M1,M2,M3 --tests 50 --json`` on the twin table (the flow
simulates it: truth M3, seed 1) from a fresh ``GREYLAB_HOME`` and again from the same, now warm
home (result cache hits, the shared local Prefect server running); the first fresh home makes
the stores' templates in the benchmark's own template folder (``runtime.store_templates``), so
a second fresh home, the state of a machine after its first, is timed too and is the fresh-home
figure (the first is printed beside it). Both against the study's own
steps called in-process in one thread without Prefect or tracking (the task functions of
``tasks.press.tasks``: load the twin, correct, normality, sensor design, fits, 50 splits, tests,
verdicts; ``in_process_press``) in a fresh interpreter, imports excluded.
Drive: ``greylab drive identify --population 10 --generations 10 --seed 0 --no-cache`` (one
worker, threads) from a warm home against ``StructureSearch(10, 10, 0).fit(reference_recording())``
in-process; both share one compile cache, warmed before the repeats (``GREYLAB_JIT_CACHE``).
Each CLI mode runs with the shared server (the default) and, for the before/after figure in the
same run, ``GREYLAB_SERVER_IDLE=0`` (a temporary server per command, as before issue 31); these
run in-process (``GREYLAB_WARM=0``). The warm command server (``runtime.warm``, the default since)
is measured from the same warm home: started by a first call and waited for, then ``press
detect`` through the thin client, timed to the answer on stdout (its first byte: ``--json``
prints the answer in one write) and to the process exit, against the in-process command of
the same home in the same repeat (``GREYLAB_WARM=0``, timed the same way).

The breakdown comes from one instrumented run per mode (``breakdown``; for the warm server, a
process that runs the daemon's preload ``flows.cli.warm_preload`` first and starts its clock
after it, i.e. the work of a warm child): the CLI runs inside a
wrapper that timestamps interpreter start, the entry of ``flows.runners.run_flow`` (imports,
argument parsing, input checks), the server start (``runtime.local_server.ensure_server`` or
Prefect's ``SubprocessASGIServer.start``), the wall time inside tracking (every public method
and constructor of ``tracking.mlflow_tracker.Tracker``, the ``tracking.recorder`` classes and the
press and drive recorders, outermost calls only: MLflow imported by the tracker, figures built
and saved, models registered), the answer printed, the flow's return and the process exit.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/cli_overhead.py [--repeats 1] [--skip-drive]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from benchmarks._cli_overhead_warm import (  # noqa: E402
    cli_timed,
    profile_warm_child,
    served,
    stop_warm,
    warm_server,
)
from benchmarks._report import Bench, add_arguments  # noqa: E402

GREYLAB = Path(sys.executable).parent / "greylab"
PRESS = ["press", "detect", "--model", "M1,M2,M3", "--tests", "50", "--json"]
DRIVE = ["drive", "identify", "--population", "10", "--generations", "10", "--seed", "0",
         "--no-cache", "--json", "--no-register-model", "--workers", "1", "--runner", "thread"]  # fmt: skip

IN_PROCESS_PRESS = """
import time
from flows.press.flow import choose_design_model
from flows.press.settings import PressStudy
from tasks.press import tasks as T
s = PressStudy(models=["M1", "M2", "M3"], n_tests=50)
t = time.perf_counter()
twin = {"truth": s.twin_truth.value, "seed": s.twin_seed}
loaded = T.load_measurements.fn(None, None, twin)
sigma = loaded["sigma"]
path = T.correct.fn(loaded["path"])
T.normality.fn(path)
model, _ = choose_design_model(s.models, s.design_model)
design = T.design.fn(model, path, s.n_sensors, s.criterion.value, sigma, s.max_sensors,
                     loaded["costs"], s.budget, s.design_refit)
splits = T.plan_splits.fn(path, s.split.value, s.n_tests, s.seed, s.calibration_fraction)
verdicts = []
for m in s.models:
    T.fit.fn(m, path, design.best_sensors, sigma)
    rows = T.test_batch.fn(m, path, design.best_sensors, sigma, splits, s.statistic.value)
    d = T.verdict.fn([rows], s.tol, s.correction.value, len(splits), m, s.split.value,
                     s.statistic.value)
    verdicts.append(d.verdict)
print("RESULT", time.perf_counter() - t, "|".join(verdicts))
"""

IN_PROCESS_DRIVE = """
import time
from models.drivetrain.excitation import reference_recording
from models.drivetrain.gp.search import StructureSearch
rec = reference_recording()
t = time.perf_counter()
StructureSearch(10, 10, 0).fit(rec)
print("RESULT", time.perf_counter() - t, "-")
"""

#: runs inside the CLI's process (`breakdown`): timestamps into the file named by argv[1]
WRAPPER = """
import json, sys, time
T0 = time.time()
DEFER_FIGURES = sys.argv.pop(2) == "defer"
PRELOAD = sys.argv.pop(2) == "preload"
if PRELOAD:  # as a child of the warm fork server: its imports done before the command
    import flows.cli
    flows.cli.warm_preload()
    flows.cli._WARM_CHILD = True  # runs in this process (no client, no report)
    T0 = time.time()
out, marks, inside = sys.argv[1], {"python_start": T0}, {"tracking": 0.0, "server": 0.0}
depth = {"n": 0}
def timed(key, fn):
    def wrapper(*a, **k):
        depth["n"] += 1
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            depth["n"] -= 1
            if depth["n"] == 0 or key == "server":
                inside[key] += time.perf_counter() - t
    return wrapper
import flows.runners as R
from runtime import local_server as L
real_run_flow = R.run_flow
def run_flow(*a, **k):
    marks["run_flow_in"] = time.time()
    if not R.SHARE_SERVER or not L.idle_seconds():
        from prefect.server.api.server import SubprocessASGIServer as S
        S.start = timed("server", S.start)
    import importlib, inspect
    import tracking.mlflow_tracker as M, tracking.recorder as REC
    for module in ("tracking.mlflow_tracker", "tracking.recorder", "tasks.press.records",
                   "tasks.drive.records"):
        mod = importlib.import_module(module)
        for cls in [c for c in vars(mod).values() if inspect.isclass(c)
                    and c.__module__ == module and (issubclass(c, (REC.Recorder, REC.Run))
                                                    or c is M.Tracker)]:
            for name, fn in list(vars(cls).items()):
                if inspect.isfunction(fn) and (not name.startswith("_") or name == "__init__"
                                               or name == "_register"):
                    setattr(cls, name, timed("tracking", fn))
    try:
        return real_run_flow(*a, **k)
    finally:
        marks["run_flow_out"] = time.time()
        marks["tracking_in_flow"] = inside["tracking"]
def rebind(real, fake):  # names imported before the patch (the preload) see it too
    for mod in list(sys.modules.values()):
        for name, value in list(getattr(mod, "__dict__", {}).items()):
            if value is real and mod is not sys.modules["__main__"] and name != "real_run_flow":
                setattr(mod, name, fake)
rebind(real_run_flow, run_flow)
import flows.cli_common as C
real_emit = C.emit
def emit(*a, **k):
    try:
        return real_emit(*a, **k)
    finally:
        sys.stdout.flush()
        marks["answer"] = time.time()
rebind(real_emit, emit)
if DEFER_FIGURES:  # the one-line hook runtime.deferred describes, applied here
    import tracking.recorder as REC
    from runtime import deferred
    real_figure = REC.Run.figure
    def figure(self, fig, name):
        deferred.defer(lambda: real_figure(self, fig, name), "figures")
    REC.Run.figure = figure
rebind(L.ensure_server, timed("server", L.ensure_server))
sys.argv = ["greylab", *sys.argv[2:]]
from flows.cli import main
code = main()
sys.stdout.flush()
marks["main_out"] = time.time()
open(out, "w").write(json.dumps({**marks, **inside}))  # the exit handlers run after this
raise SystemExit(code)
"""


def _env(home: Path, idle: str, jit: Path, warm: str = "0") -> dict[str, str]:
    env = {**os.environ, "GREYLAB_HOME": str(home), "GREYLAB_SERVER_IDLE": idle,
           "GREYLAB_JIT_CACHE": str(jit), "GREYLAB_WARM": warm, "GREYLAB_WARM_IDLE": "600",
           "XDG_RUNTIME_DIR": str(home.parent / "run"),
           "GREYLAB_STORE_TEMPLATES": str(home.parent / "store-templates")}  # fmt: skip
    for key in (
        "PREFECT_API_URL",
        "MLFLOW_TRACKING_URI",
        "PREFECT_HOME",
        "GREYLAB_CACHE_DIR",
        "PYTHONPATH",
    ):
        env.pop(key, None)
    return env


def cli(args: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall time of one console-script run (it must succeed)."""
    t = time.perf_counter()
    done = subprocess.run([str(GREYLAB), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=900)  # fmt: skip
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"greylab {' '.join(args)} failed: {done.stderr[-2000:]}")
    return wall


def in_process(code: str, env: dict[str, str], cwd: Path) -> tuple[float, str]:
    done = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(ROOT)},
                          cwd=cwd, capture_output=True, text=True, timeout=900)  # fmt: skip
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT")]
    if done.returncode != 0 or not line:
        raise SystemExit(f"in-process baseline failed: {done.stderr[-2000:]}")
    _, seconds, verdicts = line[-1].split(maxsplit=2)
    return float(seconds), verdicts


def breakdown(
    args: list[str], env: dict[str, str], cwd: Path, defer: bool = False, preload: bool = False
) -> dict[str, float]:
    """One instrumented run: seconds per phase (see the module's docstring); `defer`: with the
    recorder's figures deferred until after the answer (`runtime.deferred`'s hook); `preload`:
    as a warm child (`flows.cli.warm_preload` first, the clock starts after it)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    t = time.time()
    done = subprocess.run([sys.executable, "-P", "-c", WRAPPER, str(out), "defer" if defer else "-",
                           "preload" if preload else "-", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    end = time.time()
    if done.returncode != 0:
        raise SystemExit(f"instrumented run failed: {done.stderr[-2000:]}")
    m = json.loads(out.read_text())
    out.unlink()
    if preload:
        t = m["python_start"]  # the child's clock starts after the preload
    flow = m["run_flow_out"] - m["run_flow_in"]
    return {
        "interpreter": m["python_start"] - t,
        "imports and checks": m["run_flow_in"] - m["python_start"],
        "server start": m["server"],
        "tracking in the flow": m["tracking_in_flow"],
        "Prefect and the work": flow - m["server"] - m["tracking_in_flow"],
        "answer printed at": m["answer"] - t,
        "output and deferred work": m["main_out"] - m["run_flow_out"],
        "of which deferred tracking": m["tracking"] - m["tracking_in_flow"],
        "exit (atexit)": end - m["main_out"],
        "total": end - t,
    }


def press(bench: Bench, root: Path, jit: Path, show: bool) -> None:
    cwd = root / "lab"
    cwd.mkdir(exist_ok=True)
    base, verdicts = in_process(
        IN_PROCESS_PRESS, _env(root / f"base{time.time_ns()}", "0", jit), cwd
    )
    bench.add("press_in_process_s", base, "press: the study's steps in-process (one thread, no "
              "Prefect, no tracking; verdicts " + verdicts + ")", unit="s", fmt=".2f")  # fmt: skip
    for idle, label in (("300", "shared"), ("0", "temporary")):
        home = root / f"home-{label}-{time.time_ns()}"
        fresh = cli(PRESS, _env(home, idle, jit), cwd)
        warm = cli(PRESS, _env(home, idle, jit), cwd)
        target = {"shared": True}.get(label, False)
        if label == "shared":  # the first home made the stores' templates; another fresh
            first = fresh  # home copies them (runtime.store_templates)
            other = root / f"home-templated-{time.time_ns()}"
            fresh = cli(PRESS, _env(other, idle, jit), cwd)
            _stop(other)
            bench.add("press_fresh_first_s", first, "press CLI, fresh home, no store templates "
                      "yet (the machine's first home)", unit="s", fmt=".1f")  # fmt: skip
            bench.add("press_fresh_templates_speedup", first / fresh, "press CLI, fresh home: "
                      "the first home / another from the templates", unit="×", fmt=".2f")  # fmt: skip
        bench.add(f"press_fresh_{label}_s", fresh, f"press CLI, fresh home, {label} server",
                  unit="s", fmt=".1f")  # fmt: skip
        bench.add(f"press_warm_{label}_s", warm, f"press CLI in-process (GREYLAB_WARM=0), warm "
                  f"home, {label} server", unit="s", fmt=".1f")  # fmt: skip
        if label == "shared":
            warm_daemon(bench, home, jit, cwd, show)
        bench.add(f"press_fresh_ratio_{label}", fresh / base, f"press CLI fresh home / in-process "
                  f"({label} server)", unit="×", fmt=".2f", target=("<=", 2.0) if target else None,
                  short="CLI press detect fresh / in-process")  # fmt: skip
        if show:
            parts = breakdown(PRESS, _env(home, idle, jit), cwd)
            print(f"press, warm home, {label} server:", _fmt(parts), flush=True)
        _stop(home)


def warm_daemon(bench: Bench, home: Path, jit: Path, cwd: Path, show: bool) -> None:
    """`press detect` through the warm command server against in-process, same warm home."""
    hot, cold = _env(home, "300", jit, warm="1"), _env(home, "300", jit, warm="0")
    warm_server(hot, cwd)
    cold_answer, cold_exit = cli_timed(PRESS, cold, cwd)
    before = served(hot, cwd)
    hot_answer, hot_exit = cli_timed(PRESS, hot, cwd)
    if served(hot, cwd) != before + 1:  # e.g. the code changed meanwhile: it ran in-process
        raise SystemExit("the warm command server did not serve the measured call")
    stop_warm(hot, cwd)
    bench.add("press_warm_daemon_answer_s", hot_answer, "press CLI, warm home, warm command "
              "server: answer printed at", unit="s", fmt=".2f")  # fmt: skip
    bench.add("press_warm_daemon_s", hot_exit, "press CLI, warm home, warm command server: "
              "process exit", unit="s", fmt=".2f", target=("<=", 3.0),
              short="CLI press detect from a warm home")  # fmt: skip
    bench.add("press_in_process_answer_s", cold_answer, "press CLI in-process (GREYLAB_WARM=0), "
              "warm home: answer printed at", unit="s", fmt=".2f")  # fmt: skip
    bench.add("press_in_process_exit_s", cold_exit, "press CLI in-process (GREYLAB_WARM=0), "
              "warm home: process exit", unit="s", fmt=".2f")  # fmt: skip
    bench.add("press_warm_daemon_speedup", cold_exit / hot_exit, "press CLI exit, in-process / "
              "warm command server (same run)", unit="×", fmt=".2f")  # fmt: skip
    if show:
        parts = breakdown(PRESS, cold, cwd, preload=True)
        print("press, warm home, shared server, a warm child's work (after the preload):",
              _fmt(parts), flush=True)  # fmt: skip
        profile_warm_child(PRESS, hot, cwd)


def drive(bench: Bench, root: Path, jit: Path, show: bool) -> None:
    cwd = root / "lab"
    home = root / f"home-drive-{time.time_ns()}"
    base, _ = in_process(IN_PROCESS_DRIVE, _env(home, "0", jit), cwd)
    bench.add("drive_in_process_s", base, "drive: StructureSearch(10, 10, 0).fit in-process",
              unit="s", fmt=".1f")  # fmt: skip
    for idle, label in (("300", "shared"), ("0", "temporary")):
        cli(
            ["press", "detect", "--model", "M1", "--tests", "2", "--json"],
            _env(home, idle, jit),
            cwd,
        )  # warms the home (database, server) the way a user's earlier command would
        wall = cli(DRIVE, _env(home, idle, jit), cwd)
        bench.add(f"drive_ratio_{label}", wall / base, f"drive CLI (warm home, {label} server) / "
                  "in-process search", unit="×", fmt=".2f",
                  target=("<=", 1.3) if label == "shared" else None,
                  short="CLI drive identify / in-process search")  # fmt: skip
        if show:
            print(f"drive, warm home, {label} server:", _fmt(breakdown(DRIVE, _env(home, idle, jit),
                  cwd)), flush=True)  # fmt: skip
    _stop(home)


def _fmt(parts: dict[str, float]) -> str:
    return "; ".join(f"{k} {v:.2f} s" for k, v in parts.items())


def _stop(home: Path) -> None:
    from runtime.local_server import stop_server

    stop_server(home / "prefect")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=1)
    parser.add_argument("--skip-drive", action="store_true", help="press only")
    parser.add_argument("--no-breakdown", action="store_true", help="no instrumented runs")
    args = parser.parse_args()
    bench = Bench("cli_overhead", "platform", args.repeats, args.json)
    with tempfile.TemporaryDirectory(prefix="greylab-cli-bench-") as tmp:
        root, jit = Path(tmp), Path(tmp) / "jit"
        if not args.skip_drive:  # the compile cache both drive runs share, warmed first
            in_process(IN_PROCESS_DRIVE, _env(root / "warm", "0", jit), root)
        for i in bench.runs():
            press(bench, root, jit, show=i == 0 and not args.no_breakdown)
            if not args.skip_drive:
                drive(bench, root, jit, show=i == 0 and not args.no_breakdown)
    bench.finish()


if __name__ == "__main__":
    main()

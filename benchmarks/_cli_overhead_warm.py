"""The warm command server's part of `benchmarks/cli_overhead.py` (issue 31): a console-script
run timed to its answer and its exit, the server started and waited for, its served calls
counted, stopped, and one of its children profiled."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

GREYLAB = Path(sys.executable).parent / "greylab"


def cli_timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(answer on stdout, process exit) in seconds of one console-script run (must succeed)."""
    t = time.perf_counter()
    process = subprocess.Popen([str(GREYLAB), *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.read(1)
    answer = time.perf_counter() - t
    rest = process.stdout.read()
    err = process.stderr.read()
    code = process.wait(timeout=900)
    wall = time.perf_counter() - t
    if code != 0 or not (first + rest).strip():
        raise SystemExit(f"greylab {' '.join(args)} failed: {err[-2000:].decode()}")
    return answer, wall


def warm_server(env: dict[str, str], cwd: Path) -> int:
    """Start the warm command server of `env` (a first call) and wait until it serves; its pid."""
    from runtime import warm

    (home_parent := Path(env["XDG_RUNTIME_DIR"])).mkdir(mode=0o700, exist_ok=True)
    subprocess.run([str(GREYLAB), "--help"], env=env, cwd=cwd, capture_output=True, timeout=300)
    deadline = time.monotonic() + 300
    saved = dict(os.environ)
    try:
        os.environ.update(env)  # the socket folder comes from XDG_RUNTIME_DIR
        while time.monotonic() < deadline:
            info = warm.status(env, str(cwd))
            if info["warm_running"]:
                return int(info["warm_pid"])
            time.sleep(0.2)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    raise SystemExit(f"the warm command server did not start (logs in {home_parent})")


def served(env: dict[str, str], cwd: Path) -> int:
    """How many children the warm command server of `env` has forked (its log says)."""
    from runtime import warm

    folder = Path(env["XDG_RUNTIME_DIR"]) / "greylab"
    log = warm.paths(folder, warm.key(env, str(cwd)))["log"]
    return log.read_text().count(": child ") if log.exists() else 0


def stop_warm(env: dict[str, str], cwd: Path) -> None:
    from runtime import warm

    saved = dict(os.environ)
    try:
        os.environ.update(env)
        warm.stop(env, str(cwd))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def profile_warm_child(args: list[str], env: dict[str, str], cwd: Path) -> None:
    """One real warm child under cProfile (`GREYLAB_WARM_PROFILE`, a daemon of its own): its
    greylab functions by cumulative time (profiled: slower than unprofiled, same proportions)."""
    import glob
    import pstats

    stats = Path(env["XDG_RUNTIME_DIR"]) / "child.prof"
    env = {**env, "GREYLAB_WARM_PROFILE": str(stats)}
    warm_server(env, cwd)
    answer, wall = cli_timed(args, env, cwd)
    stop_warm(env, cwd)
    (found,) = glob.glob(f"{stats}.*")
    print(f"a warm child under cProfile (answer {answer:.2f} s, exit {wall:.2f} s):", flush=True)
    pstats.Stats(found).sort_stats("cumulative").print_stats(
        r"(flows|tasks|tracking|runtime|products)/.*\((main|run_flow|_run|model_run|design|"
        r"_register|start_run|end_run|flush|log_figure|run_deferred|ensure_store|__init__|"
        r"_fit_and_test|session|child_run|lineage)\)", 25)  # fmt: skip

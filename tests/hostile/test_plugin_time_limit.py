"""A plugin that runs for ever (issue 28, part A item 2): importing a plugin's module,
constructing it and evaluating its response on CasADi symbols are each bounded by
`GREYLAB_PLUGIN_TIMEOUT_S`, in the main thread (SIGALRM) and in any other thread (a Prefect
task thread, a Dask worker: an asynchronous exception); beyond it the call is stopped and the
error (exit 2) names the plugin, the call and the variable.

Every case runs in a subprocess with a timeout, so a regression fails instead of hanging."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from methods.errors import InputError
from methods.timeouts import ENV, call_with_time_limit, plugin_timeout_s

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = """
import time


def spin():
    while True:
        try:  # a plugin's own `except Exception` must not swallow the stop
            time.sleep(0.001)
        except Exception:
            pass


class SlowInit:
    name = "slow_init"
    sensors = ("D_vertical",)
    parameters = {"k5": 1.0}

    def __init__(self):
        spin()

    def response(self, p, forces):
        return forces


class SlowResponse:
    name = "slow_response"
    sensors = ("D_vertical",)
    parameters = {"k5": 1.0}

    def response(self, p, forces):
        spin()


class Sleeps(SlowInit):
    def __init__(self):
        time.sleep(3600)  # blocked in C: SIGALRM interrupts it in the main thread
"""

RUN = """
import sys, threading, time
from methods.errors import InputError
from models.registry import allow_models, resolve_model
from methods.press.lsq.core import compile_model

def attempt(what):
    start = time.perf_counter()
    try:
        if what == "response":
            compile_model(resolve_model("slow_plugin.models:SlowResponse"), 3)
        else:
            resolve_model(what)
    except InputError as exc:
        print(f"REFUSED {time.perf_counter() - start:.1f} {exc}", flush=True)

what, where = sys.argv[1], sys.argv[2]
if where == "main":
    attempt(what)
else:
    worker = threading.Thread(target=attempt, args=(what,), daemon=True)
    worker.start()
    worker.join(30)
print("DONE", flush=True)
"""


@pytest.fixture()
def plugin_dir(tmp_path: Path) -> Path:
    pkg = tmp_path / "slow_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text(textwrap.dedent(PLUGIN))
    (pkg / "loops_on_import.py").write_text("while True:\n    pass\n")
    return tmp_path


def _run(plugin_dir: Path, *args: str, limit: str = "1") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ENV: limit, "PYTHONPATH": f"{ROOT}{os.pathsep}{plugin_dir}"}
    return subprocess.run([sys.executable, "-c", RUN, *args], cwd=plugin_dir, env=env,
                          capture_output=True, text=True, timeout=90)  # fmt: skip


@pytest.mark.parametrize("where", ["main", "thread"])
@pytest.mark.parametrize(
    ("what", "words"),
    [
        ("slow_plugin.loops_on_import:X", "importing slow_plugin.loops_on_import:X"),
        ("slow_plugin.models:SlowInit", "the constructor SlowInit()"),
        ("response", "response(p, forces) on CasADi symbols"),
    ],
    ids=["import", "constructor", "response"],
)
def test_a_plugin_that_runs_for_ever_is_stopped_and_named(plugin_dir, where, what, words) -> None:
    done = _run(plugin_dir, what, where)
    assert "DONE" in done.stdout, done.stderr[-2000:]
    refused = [line for line in done.stdout.splitlines() if line.startswith("REFUSED")]
    assert refused, done.stdout + done.stderr[-2000:]
    seconds = float(refused[0].split()[1])
    assert 0.9 <= seconds < 10  # stopped at the limit (1 s), not before, not much after
    assert words in refused[0] and "did not finish within 1 s" in refused[0]
    assert ENV in refused[0]


def test_a_plugin_blocked_in_sleep_is_stopped_in_the_main_thread(plugin_dir) -> None:
    done = _run(plugin_dir, "slow_plugin.models:Sleeps", "main")
    assert "REFUSED" in done.stdout and "the constructor Sleeps()" in done.stdout, done.stderr


def test_the_cli_exits_2_naming_the_slow_plugin(plugin_dir, tmp_path) -> None:
    env = {**os.environ, ENV: "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{plugin_dir}",
           "GREYLAB_HOME": str(tmp_path / "home")}  # fmt: skip
    run = "import sys; from flows.cli import main; sys.exit(main())"
    lab = tmp_path / "lab.csv"
    made = subprocess.run([sys.executable, "-c", run, "press", "simulate", "--truth", "M3",
                           "--seed", "1", "--out", str(lab)], cwd=plugin_dir, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    done = subprocess.run([sys.executable, "-c", run, "press", "design", "--data", str(lab),
                           "--model", "slow_plugin.models:SlowInit"], cwd=plugin_dir, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "SlowInit()" in done.stderr and "did not finish within 1 s" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_limit_is_a_setting(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert plugin_timeout_s() == 60.0
    monkeypatch.setenv(ENV, "0")  # off: the call runs as is
    assert call_with_time_limit(lambda: 42, what="x") == 42
    for bad in ("-1", "abc", "inf"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(InputError, match=f"{ENV}="):
            plugin_timeout_s()

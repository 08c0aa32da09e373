"""Deferred work (`runtime.deferred`, issue 31): after the answer, never instead of it.

In-process (deferral off) a job runs at once and its exception propagates; in the command's
own process the job runs after the answer is printed, and a failing job leaves the answer on
stdout and the exit code 0, with one warning on stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import deferred


@pytest.fixture(autouse=True)
def _reset() -> None:
    deferred.enable(False)
    deferred.run_deferred(report=lambda _text: None)


def test_without_deferral_a_job_runs_at_once_and_raises() -> None:
    seen: list[int] = []
    deferred.defer(lambda: seen.append(1))
    assert seen == [1] and deferred.pending() == 0

    def boom() -> None:
        raise ValueError("store gone")

    with pytest.raises(ValueError, match="store gone"):
        deferred.defer(boom)


def test_deferred_jobs_run_in_order_later_and_a_failure_is_a_warning() -> None:
    seen: list[str] = []
    deferred.enable()
    deferred.defer(lambda: seen.append("a"))
    deferred.defer(lambda: 1 / 0, what="figures")
    deferred.defer(lambda: (seen.append("c"), deferred.defer(lambda: seen.append("d"))))
    assert seen == [] and deferred.pending() == 3
    reported: list[str] = []
    failures = deferred.run_deferred(report=reported.append)
    assert seen == ["a", "c", "d"]  # the job queued by a job runs too
    assert failures == reported and len(failures) == 1
    assert "figures after the answer failed (ZeroDivisionError" in failures[0]
    assert deferred.pending() == 0


def test_the_cli_prints_its_answer_before_deferred_work_and_keeps_exit_0(tmp_path: Path) -> None:
    """A command whose deferred tracking fails: the answer is on stdout, written before the
    job ran (the job records whether stdout already held it), the exit code is 0."""
    marker = tmp_path / "answer_seen_first"
    code = (
        "import sys, os\n"
        "sys.argv = ['greylab', 'server', 'status', '--json']\n"
        "from runtime import deferred\n"
        "from flows import cli\n"
        "def job():\n"
        f"    out = open({str(tmp_path / 'out.json')!r}).read()\n"
        f"    open({str(marker)!r}, 'w').write(str('running' in out))\n"
        "    raise RuntimeError('tracking store unreachable')\n"
        "real = cli._main\n"
        "def wrapped(argv):\n"
        "    code = real(argv)\n"
        "    deferred.defer(job)\n"
        "    return code\n"
        "cli._main = wrapped\n"
        "raise SystemExit(cli.main())\n"
    )
    env = {**os.environ, "GREYLAB_HOME": str(tmp_path / "home")}
    env.pop("PREFECT_API_URL", None)
    with open(tmp_path / "out.json", "w") as out:
        done = subprocess.run([sys.executable, "-P", "-c", code], stdout=out,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"running": false' in (tmp_path / "out.json").read_text()
    assert marker.read_text() == "True"  # the answer was written before the job ran
    assert "after the answer failed (RuntimeError: tracking store unreachable" in done.stderr

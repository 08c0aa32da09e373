"""Per-test CPU timing, a pytest plugin for measuring the suite (issue 31), not loaded by default:

    PYTHONPATH=. .venv/bin/pytest -p tests.cpu_timing ...

(`GREYLAB_CPU_TIMING=file.jsonl`; default `build/test-cpu.jsonl`, appended to).

One JSON line per test: its id, the CPU seconds of this process (`self`) and of the children
it waited for (`children`: the commands a test runs, not the servers it leaves running), the
wall seconds, the worker's pid and how many greylab commands the test started in a subprocess
(`commands`: a `greylab` executable or `flows.cli` on the command line). With pytest-xdist every
worker appends to the same file."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_STARTED = {"commands": 0}
_POPEN_INIT = subprocess.Popen.__init__


def _is_command(args: Any) -> bool:
    words = [str(a) for a in args] if isinstance(args, list | tuple) else str(args).split()
    return bool(words) and (Path(words[0]).name == "greylab" or "flows.cli" in " ".join(words))


def _counting_init(self: Any, args: Any, *rest: Any, **options: Any) -> None:
    if _is_command(args):
        _STARTED["commands"] += 1
    _POPEN_INIT(self, args, *rest, **options)


subprocess.Popen.__init__ = _counting_init  # type: ignore[method-assign]


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Generator[None, None, None]:
    own, children = _cpu()
    wall = time.monotonic()
    _STARTED["commands"] = 0
    yield
    own_after, children_after = _cpu()
    out = Path(os.environ.get("GREYLAB_CPU_TIMING", "build/test-cpu.jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)
    line = {"id": item.nodeid, "self": round(own_after - own, 2),
            "children": round(children_after - children, 2),
            "wall": round(time.monotonic() - wall, 2), "pid": os.getpid(),
            "commands": _STARTED["commands"]}  # fmt: skip
    with out.open("a") as file:
        file.write(json.dumps(line) + "\n")

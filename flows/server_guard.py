"""Run a temporary Prefect server (uvicorn) that dies with the process that started it.

    python -m flows.server_guard PARENT_PID -- <uvicorn arguments>

Started by `flows.runners.guard_temporary_servers` in place of `python -m uvicorn`. Two
mechanisms, because a SIGKILLed parent runs no cleanup:

- the Linux parent-death signal (`prctl(PR_SET_PDEATHSIG, SIGTERM)`), set here, in the
  server's own process: the kernel signals it when the parent thread dies;
- a daemon thread that checks every 0.5 s whether the parent pid is still our parent (the
  parent-death signal follows the *thread* that forked, and a parent that died before the
  prctl call would be missed) and otherwise ends this process.

Only the standard library is used before uvicorn runs, so the guard costs nothing measurable.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import signal
import sys
import threading
import time
from typing import Any

PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: int = signal.SIGTERM) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _watch(parent: int, period: float = 0.5) -> None:
    while True:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down on SIGTERM
            time.sleep(5)
            os._exit(1)  # still here: leave at once
        time.sleep(period)


_TARGET = "prefect.server.api.server"


class _GuardOnImport:
    """Meta-path finder: when `prefect.server.api.server` is imported, guard its servers
    (`flows.runners.guard_temporary_servers`) - without importing Prefect eagerly."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if name != _TARGET:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        if spec is None or spec.loader is None:
            return None
        loader: Any = spec.loader
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            from flows.runners import guard_temporary_servers

            guard_temporary_servers()

        loader.exec_module = exec_module
        return spec


def install_import_hook() -> None:
    """Guard Prefect's temporary servers of this process whenever Prefect's server module is
    imported (the CLI calls this first; idempotent)."""
    if _TARGET in sys.modules:
        from flows.runners import guard_temporary_servers

        guard_temporary_servers()
    elif not any(isinstance(f, _GuardOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())  # type: ignore[arg-type]


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] != "--":
        sys.exit("usage: python -m flows.server_guard PARENT_PID -- <uvicorn arguments>")
    parent = int(argv[0])
    _parent_death_signal()
    if os.getppid() != parent:  # the parent died before the signal was armed
        sys.exit(1)
    threading.Thread(target=_watch, args=(parent,), daemon=True, name="parent-watch").start()
    sys.argv = ["uvicorn", *argv[2:]]
    runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])

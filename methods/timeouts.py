"""A time limit on one call into a user's plugin model (issue 28).

A press plugin (`module:attr`, `models/registry.py`) is the user's code: importing its module,
constructing it and evaluating its `response` on CasADi symbols (`methods.press.lsq.core`) could
run for ever. `call_with_time_limit` bounds one such call by `GREYLAB_PLUGIN_TIMEOUT_S`
seconds (default 60; `0` switches the limit off), set on the machine that runs the work (the
CLI's shell or a worker's environment, not a flow parameter). Beyond it the call is stopped
and a `PluginTimeout` (an `InputError`: exit 2) names the plugin, the call and the limit.

Mechanism: in the main thread a `SIGALRM` timer (`signal.setitimer`) interrupts the call, even
inside a blocking system call such as `time.sleep`; in any other thread (a Prefect task
thread, a Dask worker) a watchdog timer raises the exception asynchronously in the calling
thread (`PyThreadState_SetAsyncExc`), which takes effect at the plugin's next Python bytecode.
Residual: outside the main thread a plugin blocked inside one long C call (a sleep, a huge
numpy or CasADi operation) is stopped only when that call returns to Python. The stop is an
exception derived from `BaseException`, so a plugin's own `except Exception` cannot swallow it.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from methods.errors import InputError

ENV = "GREYLAB_PLUGIN_TIMEOUT_S"
DEFAULT_S = 60.0
T = TypeVar("T")


class PluginTimeout(InputError):
    """A plugin call ran longer than `GREYLAB_PLUGIN_TIMEOUT_S` (exit 2)."""


class _Expired(BaseException):
    """Raised inside the plugin's call when its time is up (not an `Exception`)."""


def plugin_timeout_s() -> float:
    """The configured limit in seconds (0: none); `InputError` for an unusable value."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise InputError(
            f"environment variable {ENV}={raw[:40]!r}: expected seconds >= 0 (0: no limit)"
        )
    return value


def call_with_time_limit(fn: Callable[..., T], *args: Any, what: str, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` stopped after `GREYLAB_PLUGIN_TIMEOUT_S` seconds with a
    `PluginTimeout` naming `what` (module docstring for the mechanism)."""
    limit = plugin_timeout_s()
    if limit <= 0:
        return fn(*args, **kwargs)
    try:
        if threading.current_thread() is threading.main_thread() and _alarm_free():
            return _with_alarm(limit, fn, args, kwargs)
        return _with_watchdog(limit, fn, args, kwargs)
    except _Expired:
        raise PluginTimeout(
            f"{what} did not finish within {limit:g} s ({ENV}; a plugin that is slow on "
            "purpose needs a larger value on this machine)"
        ) from None


def _alarm_free() -> bool:
    """True when nobody else uses the process's real-time timer."""
    return hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _with_alarm(limit: float, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
    def expire(signum: int, frame: Any) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit)
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _with_watchdog(limit: float, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if state["done"]:
                return
            state["fired"] = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(_Expired))

    timer = threading.Timer(limit, fire)
    timer.daemon = True
    timer.start()
    try:
        return fn(*args, **kwargs)
    finally:
        with lock:
            state["done"] = True
            timer.cancel()
            if state["fired"]:  # raised but perhaps not yet delivered: take it back
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)

"""Resource limits of the studies: what one CLI call or one flow run (from the dashboard) may ask.

Defaults fit a 2-core, 24 GiB machine; each is configurable on the machine that runs the work
(the CLI's shell or the worker's environment; a flow parameter cannot raise them):

| variable                       | limits                                         | default   |
|--------------------------------|------------------------------------------------|-----------|
| `GREYLAB_MAX_INVERSE_STEPS`    | steps of one inverse simulation, (t_end - t_start) / dt | 2,000,000 |
| `GREYLAB_MAX_INVERSE_RUNS`     | simulations of one inverse study (systems x step sizes) | 50 |
| `GREYLAB_MAX_GP_EVALUATIONS`   | drive search: population x generations          | 5,000     |
| `GREYLAB_MAX_POPULATION`       | drive search: individuals per generation        | 500       |
| `GREYLAB_MAX_WORKERS`          | parallel workers of a study                     | 8         |
| `GREYLAB_MAX_TESTS`            | press: calibration/validation tests per model   | 10,000    |
| `GREYLAB_MAX_MODELS`           | press: candidate models of one study            | 20        |
| `GREYLAB_MAX_DRIVE_SAMPLES`    | drive: samples of one simulation (identify, validate) | 500,000 |
| `GREYLAB_MAX_DRIVE_SUBSTEPS`   | drive: RK4 substeps per sample                  | 10,000    |
| `GREYLAB_MAX_DRIVE_WORK`       | drive: substeps x samples x states of one simulation | 2,000,000,000 |

The drive limits live with the model (`models/budget.py`, the cost of a simulation estimated
before anything is allocated: the worker's search and `drive validate` check them where the
simulator is built); they are listed here so that `Limits.current()` shows every limit.

A two-mass inverse simulation of 1e5 steps takes about 1.5 s and 150 MB; 2e6 steps stay well
inside the memory. Errors name the setting, the value asked for, the limit and the variable.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from methods.errors import InputError
from models.budget import DEFAULTS as DRIVE_DEFAULTS

_DEFAULTS = {
    "GREYLAB_MAX_INVERSE_STEPS": 2_000_000,
    "GREYLAB_MAX_INVERSE_RUNS": 50,
    "GREYLAB_MAX_GP_EVALUATIONS": 5_000,
    "GREYLAB_MAX_POPULATION": 500,
    "GREYLAB_MAX_WORKERS": 8,
    "GREYLAB_MAX_TESTS": 10_000,
    "GREYLAB_MAX_MODELS": 20,
    **DRIVE_DEFAULTS,
}


def limit(variable: str) -> int:
    """The configured limit (a positive integer) of `variable`, or its default."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return _DEFAULTS[variable]
    try:
        value = int(float(raw))
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(
            f"environment variable {variable}={raw[:40]!r}: expected a positive integer"
        )
    return value


def check(what: str, value: float, variable: str) -> None:
    """Raise `InputError` when `value` exceeds the limit named by `variable`."""
    cap = limit(variable)
    if not math.isfinite(value) or value > cap:
        shown = f"{value:,.6g}" if isinstance(value, float) else f"{value:,}"
        raise InputError(
            f"{what} = {shown} exceeds the limit of {cap:,} (set {variable} on this machine "
            "to allow more)"
        )


def inverse_steps(t_start: float, t_end: float, dt: float) -> int:
    """Steps of one inverse simulation; `InputError` above `GREYLAB_MAX_INVERSE_STEPS`."""
    steps = (t_end - t_start) / dt
    check(
        f"steps (t_end - t_start) / dt = ({t_end:g} - {t_start:g}) / {dt:g}",
        steps,
        "GREYLAB_MAX_INVERSE_STEPS",
    )
    return round(steps)


@dataclass(frozen=True)
class Limits:
    """A snapshot of every limit (for reports and tests)."""

    values: dict[str, int]

    @classmethod
    def current(cls) -> Limits:
        return cls({name: limit(name) for name in _DEFAULTS})

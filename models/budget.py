"""Bounded work for drive-train simulations: the cost of a simulation, estimated before
anything is allocated, and the machine's limits on it (issue 28).

A drive-train simulator (``models.drivetrain.simulate``) integrates ``samples - 1`` sample
steps of ``substeps`` RK4 substeps over ``states`` states, with forward sensitivities of
``parameters`` parameters; a delay adds ``delay_taps`` shifted copies of the input. Its cost:

- **work** = ``substeps x (samples - 1) x states`` (+ ``delay_taps x samples``): state
  updates of one simulation; the time of one simulation grows with it;
- **bytes**, an upper estimate of the memory to build and run it: ``samples x``
  :data:`BYTES_PER_SAMPLE` (measured: building the whole-record CasADi functions with
  sensitivities took 1.7-1.9 GB for 2e5-4e5 samples and 17 GB for 2e6, i.e. up to ~8.5 kB a
  sample; the function with sensitivities is built only on the first Jacobian, so a
  validation, which never asks for one, needs about a quarter: 0.6 GB for 4e5 samples, and
  a whole `drive validate` of 1.999e6 samples peaked at 4.4 GB in 28 s, was 17 GB)
  plus the trajectories with sensitivities (``8 x states x (1 + parameters)`` a
  sample), the substep weights (``96 x substeps``) and the delay's shifted inputs
  (``32 x delay_taps x samples``).

The limits are set on the machine that runs the work (the CLI's shell or a worker's
environment; a flow parameter cannot raise them), like those of ``models/limits.py``:

| variable                      | limits                                              | default       |
|-------------------------------|-----------------------------------------------------|---------------|
| `GREYLAB_MAX_DRIVE_SAMPLES`   | samples of one drive simulation (identify, validate)| 500,000       |
| `GREYLAB_MAX_DRIVE_SUBSTEPS`  | RK4 substeps per sample (step-size rule, `min_substeps`) | 10,000   |
| `GREYLAB_MAX_DRIVE_WORK`      | substeps x samples x states of one simulation       | 2,000,000,000 |

For scale: the paper's reference (2,001 samples, 1 substep, 4 states) is 8e3 state updates;
EMPS at 1 kHz with backlash (24,841 samples, 32 substeps, 5 states) 4e6; 500,000 samples are
estimated at ~5 GB with sensitivities. A refusal is an ``InputError`` (exit 2) that names the numbers, the limit, its
variable and why the substep count is what it is.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from methods.errors import InputError

MAX_SAMPLES = "GREYLAB_MAX_DRIVE_SAMPLES"
MAX_SUBSTEPS = "GREYLAB_MAX_DRIVE_SUBSTEPS"
MAX_WORK = "GREYLAB_MAX_DRIVE_WORK"
DEFAULTS = {MAX_SAMPLES: 500_000, MAX_SUBSTEPS: 10_000, MAX_WORK: 2_000_000_000}
#: bytes per sample to build and hold a whole-record simulator with sensitivities (measured,
#: see the module docstring; rounded up)
BYTES_PER_SAMPLE = 10_000


class LimitError(InputError):
    """A request beyond the machine's limits (exit 2, like every `InputError`)."""


def limit(variable: str) -> int:
    """The configured limit (a positive integer) of `variable`, or its default."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return DEFAULTS[variable]
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):
        value = 0
    if value < 1:
        raise InputError(
            f"environment variable {variable}={raw[:40]!r}: expected a positive integer"
        )
    return value


@dataclass(frozen=True)
class SimulationCost:
    """The size of one drive simulation (module docstring): what it will cost, known before
    anything is built."""

    samples: int
    substeps: float  # float: an unbounded step-size rule gives inf, or 1e12
    states: int
    parameters: int = 0
    delay_taps: int = 0

    @property
    def work(self) -> float:
        return (
            self.substeps * max(self.samples - 1, 0) * self.states
            + float(self.delay_taps) * self.samples
        )

    @property
    def bytes(self) -> float:
        per_sample = BYTES_PER_SAMPLE + 8 * self.states * (1 + self.parameters)
        return (
            self.samples * per_sample + 96.0 * self.substeps + 32.0 * self.delay_taps * self.samples
        )

    def describe(self) -> str:
        return (
            f"{self.samples:,} samples x {_num(self.substeps)} RK4 substeps x {self.states} "
            f"states = {_num(self.work)} state updates, about {_gib(self.bytes)} of memory"
        )


def _num(value: float) -> str:
    if not math.isfinite(value):
        return "infinitely many"
    return f"{value:,.0f}" if value < 1e12 else f"{value:.3g}"


def _gib(n_bytes: float) -> str:
    if not math.isfinite(n_bytes):
        return "unbounded"
    return f"{n_bytes / 2**30:.3g} GiB" if n_bytes >= 2**28 else f"{n_bytes / 2**20:.3g} MiB"


def check_samples(samples: int, what: str) -> None:
    """`LimitError` when a record of `samples` samples is beyond `GREYLAB_MAX_DRIVE_SAMPLES`
    (checked as soon as the record's length is known, before any simulator is built)."""
    cap = limit(MAX_SAMPLES)
    if samples > cap:
        need = SimulationCost(samples, 1, 1).bytes
        raise LimitError(
            f"{what}: {samples:,} samples exceed the limit of {cap:,} samples of one drive "
            f"simulation (its simulator with sensitivities takes up to about {_gib(need)}; set "
            f"{MAX_SAMPLES} on this machine to allow more, or decimate the recording)"
        )


def check_substeps(substeps: float, what: str, why: str = "") -> None:
    """`LimitError` when `substeps` RK4 substeps per sample exceed `GREYLAB_MAX_DRIVE_SUBSTEPS`
    (or are not finite); `why` says where the number comes from."""
    cap = limit(MAX_SUBSTEPS)
    if not substeps <= cap:
        raise LimitError(
            f"{what}: {_num(substeps)} RK4 substeps per sample exceed the limit of {cap:,}"
            + (f" ({why})" if why else "")
            + f"; set {MAX_SUBSTEPS} on this machine to allow more"
        )


def check_cost(cost: SimulationCost, what: str, why: str = "") -> None:
    """Refuse a simulation beyond any limit (samples, substeps, work), before allocating."""
    check_samples(cost.samples, what)
    check_substeps(cost.substeps, what, why)
    cap = limit(MAX_WORK)
    if not cost.work <= cap:
        raise LimitError(
            f"{what}: one simulation of {cost.describe()} exceeds the limit of {cap:,} state "
            f"updates" + (f" ({why})" if why else "") + f"; set {MAX_WORK} on this machine to "
            "allow more"
        )

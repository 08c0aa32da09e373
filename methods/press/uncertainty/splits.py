"""Calibration/validation splits of a measurement cube.

Kinds (``SplitKind``):

- ``random``: Monte-Carlo over steps. ``round(fraction * n_q)`` random steps (all series)
  calibrate, the other steps validate.
- ``series``: Monte-Carlo over series (all steps). Cannot reveal hysteresis errors: every
  series repeats the same path, so both halves share the same model error.
- ``magnitude``: low vs high forces. A threshold between two consecutive distinct setpoints,
  drawn at random among the thresholds that leave between 25 % and 75 % of the steps on the
  low side; the low steps (loading and unloading) calibrate, the high steps validate.
- ``phase``: loading steps calibrate, unloading steps validate (one split).

The deterministic kinds have few distinct splits (``phase``: 1; ``magnitude``: the candidate
thresholds; ``series``: C(n_M, n_cal)). Repeating an identical test adds no information but
makes Bonferroni stricter, so ``make_splits`` returns at most the number of DISTINCT splits
available, and the multiple-testing correction uses the number of tests actually run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import TypeVar

import numpy as np

from methods.errors import InputError


class SplitKind(StrEnum):
    """random: Monte-Carlo over steps; series: over repetitions; magnitude: low vs high
    forces; phase: loading vs unloading."""

    RANDOM = "random"
    SERIES = "series"
    MAGNITUDE = "magnitude"
    PHASE = "phase"


E = TypeVar("E", bound=Enum)


def parse_enum(enum: type[E], value: object, what: str) -> E:
    try:
        return enum(value)
    except ValueError:
        raise InputError(
            f"{what} must be one of {[e.value for e in enum]}, got {value!r}"
        ) from None


@dataclass(frozen=True)
class Split:
    """One split: ``axis`` "step" or "series"; ``cal``/``val`` positional indices (0-based
    positions along that axis of the cube, not table ids); ``test`` its number."""

    test: int
    axis: str
    cal: tuple[int, ...]
    val: tuple[int, ...]

    def masks(self, n_m: int, n_q: int) -> tuple[np.ndarray, np.ndarray]:
        """0/1 weights (n_M, n_q) of the calibration and validation sets."""
        cal, val = np.zeros((n_m, n_q)), np.zeros((n_m, n_q))
        if self.axis == "step":
            cal[:, list(self.cal)] = 1.0
            val[:, list(self.val)] = 1.0
        else:
            cal[list(self.cal), :] = 1.0
            val[list(self.val), :] = 1.0
        return cal, val


def _random_distinct(rng, n: int, k: int, n_tests: int) -> list[tuple[int, ...]]:
    cap = math.comb(n, k)
    seen: dict[tuple[int, ...], None] = {}
    attempts = 0
    while len(seen) < min(n_tests, cap) and attempts < 50 * n_tests + 100:
        seen[tuple(sorted(rng.choice(n, size=k, replace=False).tolist()))] = None
        attempts += 1
    return list(seen)


def make_splits(
    kind: SplitKind | str,
    setpoints: np.ndarray,
    loading: np.ndarray,
    n_series: int,
    n_tests: int,
    seed: int = 0,
    fraction: float = 0.5,
) -> list[Split]:
    """Up to ``n_tests`` distinct splits of a cube with ``n_series`` series and the scenario
    ``setpoints`` (n_q,), ``loading`` (n_q,) bool; seeded by ``seed``; ``fraction`` is the
    calibration share for the random kinds."""
    kind = parse_enum(SplitKind, kind, "split")
    if n_tests < 1:
        raise InputError(f"n_tests must be >= 1, got {n_tests}")
    if not 0.0 < fraction < 1.0:
        raise InputError(f"calibration_fraction must lie in (0, 1), got {fraction}")
    rng = np.random.default_rng(seed)
    n_q = len(setpoints)
    if kind is SplitKind.RANDOM or kind is SplitKind.SERIES:
        n, axis = (n_q, "step") if kind is SplitKind.RANDOM else (n_series, "series")
        if n < 2:
            raise InputError(f"a {kind.value} split needs at least 2 {axis}s, got {n}")
        k = min(max(round(fraction * n), 1), n - 1)
        cals = _random_distinct(rng, n, k, n_tests)
        return [
            Split(t, axis, c, tuple(i for i in range(n) if i not in set(c)))
            for t, c in enumerate(cals)
        ]
    if kind is SplitKind.PHASE:
        cal = tuple(np.flatnonzero(loading).tolist())
        val = tuple(np.flatnonzero(~loading).tolist())
        if not cal or not val:
            raise InputError("phase split needs both loading and unloading steps")
        return [Split(0, "step", cal, val)]
    levels = np.unique(setpoints)
    thresholds = 0.5 * (levels[:-1] + levels[1:])
    share = np.array([(setpoints <= t).mean() for t in thresholds])
    cand = thresholds[(share >= 0.25) & (share <= 0.75)]
    if cand.size == 0:
        raise InputError("magnitude split needs at least two distinct setpoint levels")
    chosen = rng.choice(cand, size=min(n_tests, cand.size), replace=False)
    return [
        Split(
            t,
            "step",
            tuple(np.flatnonzero(setpoints <= thr).tolist()),
            tuple(np.flatnonzero(setpoints > thr).tolist()),
        )
        for t, thr in enumerate(np.sort(chosen))
    ]

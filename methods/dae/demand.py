"""The demand: desired trajectories of the outputs, parsed from a plain dict (YAML).

Format (times in s, values in the output's SI unit; every output of the system needs an
entry, either under ``outputs`` or through a ``paths`` entry)::

    t_start: 0.0            # optional, default 0
    t_end: 12.0             # optional (the system's default horizon otherwise)
    outputs:
      x: {type: step, start: 0.0, end: 2.0, t0: 1.0, t1: 7.0, degree: 9}
      z: {type: constant, value: -3.0}
      s: {type: velocity_step, v_start: 5.0, v_end: 7.0, t0: 10, t1: 40, x0: 0, degree: 11}
      w: {type: polynomial, coefficients: [0.0, 1.0], t_ref: 0.0}
      y: {type: steps, start: 0.0, degree: 9,
          moves: [{to: 1.0, t0: 1, t1: 4}, {to: -1.0, t0: 6, t1: 10}]}
      r: {type: piecewise, pieces: [{from: 0.0, type: constant, value: 0.0},
                                     {from: 2.0, type: polynomial, coefficients: [0, 0, 1], t_ref: 2}]}
    paths:                  # multi-axis: rest-to-rest moves through waypoints, one profile
      - {axes: [x, y], degree: 9, waypoints: [[0, 0], [2, 1], [2, 3]], times: [1, 5, 9], durations: [3, 3]}

``step``: rest-to-rest smooth step, odd ``degree >= 3`` (``2r+1`` gives ``C^r``; the controls
need ``C^4``, so use 9 or more). ``paths``: segment ``i`` moves all axes along a straight line
from waypoint ``i`` to ``i+1``, starting at ``times[i]`` and lasting ``durations[i]`` (default:
until the next start time), with one smooth step profile (the path is the polygon).
Errors are :class:`~methods.errors.InputError` naming the offending key. Sizes are bounded
(a demand may come from a dashboard): ``degree <= MAX_DEGREE``, at most ``MAX_ITEMS`` moves,
pieces, coefficients, waypoints or paths.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from methods.dae.trajectories import (
    Constant,
    Piecewise,
    Polynomial,
    SmoothStep,
    Steps,
    Trajectory,
    VelocityStep,
)
from methods.errors import InputError

__all__ = ["Demand", "parse_demand"]

MAX_DEGREE = 61  # C^30; a chain of N masses needs 4N + 1
MAX_ITEMS = 1000


def _bounded(items: Sequence, where: str) -> Sequence:
    if len(items) > MAX_ITEMS:
        raise InputError(f"{where}: {len(items)} entries, at most {MAX_ITEMS} are allowed")
    return items


@dataclass(frozen=True)
class Demand:
    """Trajectories of the demanded outputs by name; optional horizon ``[t_start, t_end]``."""

    outputs: Mapping[str, Trajectory]
    t_end: float | None = None
    t_start: float = 0.0
    spec: dict = field(default_factory=dict, compare=False)

    def evaluate(self, names: Sequence[str], t: np.ndarray, order: int) -> np.ndarray:
        """``(order + 1, m, len(t))``: derivatives ``0..order`` of each output in ``names``."""
        t = np.atleast_1d(np.asarray(t, float))
        return np.stack([self.outputs[nm].derivatives(t, order) for nm in names], axis=1)

    def continuity(self) -> dict[str, tuple[float, float | None]]:
        return {nm: tr.continuity() for nm, tr in self.outputs.items()}

    def last_event(self) -> float:
        ev = [e for tr in self.outputs.values() for e in tr.events()]
        return max(ev, default=self.t_start)

    def check_names(self, names: Sequence[str]) -> None:
        missing = [nm for nm in names if nm not in self.outputs]
        extra = [nm for nm in self.outputs if nm not in names]
        if missing or extra:
            raise InputError(
                f"demand outputs do not match the system's outputs {list(names)}: "
                f"missing {missing}, unknown {extra}"
            )


def _num(spec: Mapping, key: str, where: str, default=None) -> float:
    if key not in spec:
        if default is not None:
            return float(default)
        raise InputError(f"{where}: missing key {key!r}")
    val = spec[key]
    if isinstance(val, bool) or not isinstance(val, int | float) or not math.isfinite(val):
        raise InputError(f"{where}.{key}: expected a finite number, got {val!r}")
    return float(val)


def _degree(spec: Mapping, where: str, default: int = 9) -> int:
    deg = spec.get("degree", default)
    if isinstance(deg, bool) or not isinstance(deg, int) or deg < 3 or deg % 2 == 0:
        raise InputError(
            f"{where}.degree: must be an odd integer >= 3 (9 or more), got {str(deg)[:40]!r}"
        )
    if deg > MAX_DEGREE:
        raise InputError(f"{where}.degree: at most {MAX_DEGREE}, got {deg}")
    return deg


def _times(spec, where):
    t0, t1 = _num(spec, "t0", where), _num(spec, "t1", where)
    if not t1 > t0:
        raise InputError(f"{where}: need t1 > t0, got t0={t0}, t1={t1}")
    return t0, t1


def _trajectory(spec, where: str) -> Trajectory:
    if not isinstance(spec, Mapping):
        raise InputError(f"{where}: expected a mapping with a 'type', got {spec!r}")
    kind = spec.get("type")
    if kind == "constant":
        return Constant(_num(spec, "value", where))
    if kind == "step":
        t0, t1 = _times(spec, where)
        return SmoothStep(
            _num(spec, "start", where), _num(spec, "end", where), t0, t1, _degree(spec, where)
        )
    if kind == "velocity_step":
        t0, t1 = _times(spec, where)
        return VelocityStep(
            _num(spec, "v_start", where), _num(spec, "v_end", where), t0, t1,
            _num(spec, "x0", where, 0.0), _num(spec, "t_ref", where, 0.0), _degree(spec, where),
        )  # fmt: skip
    if kind == "polynomial":
        coef = spec.get("coefficients")
        if not isinstance(coef, Sequence) or not coef:
            raise InputError(f"{where}.coefficients: expected a non-empty list of numbers")
        _bounded(coef, f"{where}.coefficients")
        vals = tuple(_num({"c": c}, "c", f"{where}.coefficients") for c in coef)
        return Polynomial(vals, _num(spec, "t_ref", where, 0.0))
    if kind == "steps":
        moves = spec.get("moves")
        if not isinstance(moves, Sequence) or not moves:
            raise InputError(f"{where}.moves: expected a non-empty list of {{to, t0, t1}}")
        mv = []
        for i, mspec in enumerate(_bounded(moves, f"{where}.moves")):
            w = f"{where}.moves[{i}]"
            if not isinstance(mspec, Mapping):
                raise InputError(f"{w}: expected a mapping {{to, t0, t1}}")
            mv.append((_num(mspec, "to", w), *_times(mspec, w)))
        return Steps(_num(spec, "start", where), mv, _degree(spec, where))
    if kind == "piecewise":
        pieces = spec.get("pieces")
        if not isinstance(pieces, Sequence) or not pieces:
            raise InputError(f"{where}.pieces: expected a non-empty list")
        breaks, trs = [], []
        for i, pspec in enumerate(_bounded(pieces, f"{where}.pieces")):
            w = f"{where}.pieces[{i}]"
            if not isinstance(pspec, Mapping):
                raise InputError(f"{w}: expected a mapping")
            breaks.append(_num(pspec, "from", w))
            trs.append(_trajectory({k: v for k, v in pspec.items() if k != "from"}, w))
        return Piecewise(tuple(breaks), tuple(trs))
    raise InputError(
        f"{where}.type: must be one of constant, step, steps, velocity_step, polynomial, "
        f"piecewise; got {kind!r}"
    )


def _path(spec, where: str) -> dict[str, Trajectory]:
    if not isinstance(spec, Mapping):
        raise InputError(f"{where}: expected a mapping")
    axes = spec.get("axes")
    if not isinstance(axes, Sequence) or isinstance(axes, str) or not axes:
        raise InputError(f"{where}.axes: expected a list of output names")
    raw_points = spec.get("waypoints", [])
    if isinstance(raw_points, Sequence):
        _bounded(raw_points, f"{where}.waypoints")
    try:
        pts = np.asarray(raw_points, dtype=float)
    except (TypeError, ValueError):
        raise InputError(
            f"{where}.waypoints: expected a list of points (lists of numbers)"
        ) from None
    if pts.ndim != 2 or pts.shape[1] != len(axes) or pts.shape[0] < 2:
        raise InputError(
            f"{where}.waypoints: expected >= 2 points with {len(axes)} coordinates each"
        )
    times = [float(t) for t in spec.get("times", [])]
    if len(times) != len(pts) - 1:
        raise InputError(f"{where}.times: expected {len(pts) - 1} start times (one per segment)")
    durs = spec.get("durations")
    if durs is None:
        if len(times) == 1:
            raise InputError(f"{where}.durations: needed for a single segment")
        durs = [t2 - t1 for t1, t2 in itertools.pairwise(times)] + [times[-1] - times[-2]]
    durs = [float(d) for d in durs]
    if len(durs) != len(times) or any(d <= 0 for d in durs):
        raise InputError(f"{where}.durations: expected {len(times)} positive durations")
    for i in range(len(times) - 1):
        if times[i] + durs[i] > times[i + 1] + 1e-12:
            raise InputError(f"{where}: segment {i} ends after segment {i + 1} starts")
    deg = _degree(spec, where)
    out: dict[str, Trajectory] = {}
    for a, name in enumerate(axes):
        moves = [(pts[i + 1, a], times[i], times[i] + durs[i]) for i in range(len(times))]
        out[str(name)] = Steps(float(pts[0, a]), moves, deg)
    return out


def parse_demand(spec: Mapping, output_names: Sequence[str] | None = None) -> Demand:
    """Parse the documented dict format; check the names against ``output_names`` if given."""
    if not isinstance(spec, Mapping):
        raise InputError(f"demand: expected a mapping, got {type(spec).__name__}")
    unknown = set(spec) - {"t_start", "t_end", "outputs", "paths"}
    if unknown:
        raise InputError(
            f"demand: unknown keys {sorted(unknown)} (allowed: t_start, t_end, outputs, paths)"
        )
    outputs: dict[str, Trajectory] = {}
    outs = spec.get("outputs", {}) or {}
    if not isinstance(outs, Mapping):
        raise InputError("demand.outputs: expected a mapping name -> trajectory")
    for name, tspec in outs.items():
        outputs[str(name)] = _trajectory(tspec, f"demand.outputs.{name}")
    paths = spec.get("paths", []) or []
    if not isinstance(paths, Sequence) or isinstance(paths, str):
        raise InputError("demand.paths: expected a list of paths")
    for i, pspec in enumerate(_bounded(paths, "demand.paths")):
        for name, tr in _path(pspec, f"demand.paths[{i}]").items():
            if name in outputs:
                raise InputError(f"demand.paths[{i}]: output {name!r} is already demanded")
            outputs[name] = tr
    t_start = _num(spec, "t_start", "demand", 0.0)
    t_end = _num(spec, "t_end", "demand") if "t_end" in spec else None
    if t_end is not None and not t_end > t_start:
        raise InputError(f"demand.t_end: must be after t_start = {t_start}, got {t_end}")
    demand = Demand(outputs, t_end, t_start, dict(spec))
    if output_names is not None:
        demand.check_names(output_names)
    return demand

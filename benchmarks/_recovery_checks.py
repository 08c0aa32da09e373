"""Checks of one recovered machine for ``drive_recovery.py``: the truth against the data's
boxes, the parameters' errors and 95 % intervals, the truth's RSS in the fit's model; and the
kit's structures its ``kit`` mode draws from (``small_structures``)."""

from __future__ import annotations

import itertools
import math
import time

from models.drivetrain import submodels as kit
from models.drivetrain.gp.objective import Objective
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.signals import split_index
from models.drivetrain.simulate import get_simulator
from models.drivetrain.structure_fit import structure_evidence


def box_misses(truth: dict[str, float], gp, structure) -> list[str]:
    """Names of true parameters outside the box the data preset gives."""
    out = []
    for kind in structure:
        for s in gp.specs(kind):
            if s.name in truth and not s.lower <= truth[s.name] <= s.upper:
                out.append(f"{s.name} {truth[s.name]:.3g} not in {s.lower:.3g}..{s.upper:.3g}")
    return out


def rel_errors(truth: dict[str, float], found: dict[str, float]) -> dict[str, float]:
    return {k: abs(found[k] - v) / max(abs(v), 1e-300) for k, v in truth.items() if k in found}


def interval_check(
    structure, truth: dict[str, float], found: dict[str, float], rec, gp, n_sub=None,
    gain: float | None = None,
) -> dict:  # fmt: skip
    """``ident``: the largest relative error over the parameters the evidence calls
    identifiable (0 when none), ``outside``: true values outside their 95 % interval
    (``n_sub``: the fit's substeps), ``outside_joint`` those outside their simultaneous
    interval (``evidence.ParameterInterval.joint_lower``); ``param_errors``: each one's
    relative error, ``parameters`` the model's values (a row's ``parameters`` can be checked
    again), ``true_parameters`` the truth, ``intervals`` the 95 % intervals (None: unbounded;
    the rows say which parameter missed, by how much). ``gain``: the machine's friction gain,
    when the fit estimated its own (``gp.f_tanh``): then ``f_tanh`` is one more parameter of a
    structure with smoothed friction, in the covariance as in these figures
    (``structure_evidence(gain_estimated=True)``)."""
    ev = structure_evidence(structure, found, as_arrays(rec), gp, n_sub=n_sub,
                            gain_estimated=gain is not None)  # fmt: skip
    values = {p.name: p.value for p in ev.parameters}  # with the gain when it is estimated
    truth = truth | ({"f_tanh": gain} if "f_tanh" in values else {})  # (only when given)
    errs = rel_errors(truth, values)
    ident = [errs[p.name] for p in ev.parameters if p.identifiable and p.name in errs]
    outside = [p.name for p in ev.parameters
               if p.name in truth and not p.lower <= truth[p.name] <= p.upper]  # fmt: skip
    joint = [p.name for p in ev.parameters
             if p.name in truth and not p.joint_lower <= truth[p.name] <= p.joint_upper]  # fmt: skip
    return {"ident": max(ident, default=0.0), "outside": outside, "outside_joint": joint,
            "unident": [p.name for p in ev.parameters if not p.identifiable],
            "param_errors": {k: float(f"{v:.3g}") for k, v in errs.items()},
            "parameters": {k: float(v) for k, v in found.items()},  # the model's (no gain)
            "true_parameters": {k: float(v) for k, v in truth.items()},
            "intervals": {p.name: [_finite(p.lower), _finite(p.upper)] for p in ev.parameters}}  # fmt: skip


def _finite(x: float) -> float | None:
    """``x``, or None where it is not finite (an unidentifiable parameter's interval): the
    rows stay strict JSON."""
    return float(x) if math.isfinite(x) else None


def truth_rss(structure, truth: dict[str, float], rec, gp, n_sub: int) -> float:
    """The identification's own RSS (prefiltered velocity and position error over the
    identification part) at the true parameters in the fit's model: its friction gain
    ``gp.f_tanh`` and ``n_sub`` substeps. Not above the fit's: the fit did not stall, the
    machine is not in the model."""
    data = as_arrays(rec)
    n_fit = split_index(data.n, gp.test_fraction)

    def make(n_samples: int, n: int, native: bool = False):
        return get_simulator(structure, n_samples, data.dt, n_sub=n, **gp.kit_options())

    sim = make(n_fit, n_sub)
    start = sim.model.values(truth)
    obj = Objective(make, sim, data, n_fit, gp.identification, start, time.perf_counter())
    r = obj.raw_residual(obj.normalised(start), sim)
    return float(r @ r) * obj.scale**2


def coverage(rows: list[dict], level: float = 0.95) -> tuple[float, float, int]:
    """Over the rows that name their parameters (``param_errors``): the share of true values
    inside their intervals (a ``level`` interval's promise: about ``level``), the all-inside
    rate ``level ** d`` would give if each of a row's ``d`` intervals held independently (what
    "every value inside" can expect of marginal intervals: 0.57 for 11 parameters), and the
    number of parameters counted. NaN without such rows."""
    named = [r for r in rows if isinstance(r.get("param_errors"), dict) and r["param_errors"]]
    total = sum(len(r["param_errors"]) for r in named)
    if not total:
        return float("nan"), float("nan"), 0
    inside = total - sum(len(r.get("outside") or []) for r in named)
    expected = sum(level ** len(r["param_errors"]) for r in named) / len(named)
    return inside / total, expected, total


def interval_figures(bench, exact: list[dict]) -> None:
    """The benchmark's interval figures over the exact answers' rows: every true value inside
    its marginal 95 % interval (``covered``, the issue's reading), inside its simultaneous one
    (``covered_joint``, rows since session 22), and the share of values inside
    (``covered_params``, :func:`coverage`); none without exact answers (a share of nothing
    is not 0 %)."""
    if not exact:
        return
    covered = sum(not r["outside"] for r in exact)
    bench.add("covered", 100.0 * covered / max(len(exact), 1), "search, of the exact ones: "
              "every true value inside its 95 % interval", unit="%", fmt=".0f",
              target=(">=", 90.0))  # fmt: skip
    joint = [r for r in exact if "outside_joint" in r]
    bench.add("covered_joint", 100.0 * sum(not r["outside_joint"] for r in joint)
              / max(len(joint), 1), f"search, of the exact ones ({len(joint)} with them): "
              "every true value inside its simultaneous 95 % interval", unit="%", fmt=".0f",
              target=(">=", 90.0))  # fmt: skip
    share, expected, k = coverage(exact)
    bench.add("covered_params", 100.0 * share, f"search, of the exact ones: true values inside "
              f"their 95 % intervals ({k} parameters; all inside at independent 95 %: "
              f"{100.0 * expected:.0f} %)", unit="%", fmt=".0f")  # fmt: skip


def residual_figures(bench, rows: list[dict]) -> None:
    """Whether the answers' evidence says what they miss: of the exact answers, the share whose
    residual tests pass (``residuals_passed``, rows since session 23; a correct answer should,
    at the tests' 99 %), and of the answers that lack part of the truth (simpler or other) the
    share whose tests fail (the answer's own evidence flags that the data show something it
    does not model; a richer answer lacks nothing)."""
    told = [r for r in rows if isinstance(r.get("residuals_passed"), bool)]
    exact = [r for r in told if r.get("relation") == "same"]
    misses = [r for r in told if r.get("relation") in ("simpler", "other")]
    bench.add("white_exact", 100.0 * sum(r["residuals_passed"] for r in exact)
              / max(len(exact), 1), f"search, of the exact ones ({len(exact)} with them): "
              "residual tests pass", unit="%", fmt=".0f")  # fmt: skip
    bench.add("flagged", 100.0 * sum(not r["residuals_passed"] for r in misses)
              / max(len(misses), 1), f"search, of the misses lacking a part ({len(misses)} with them): the "
              "answer's residual tests fail (its evidence flags a missing part)", unit="%",
              fmt=".0f")  # fmt: skip


def small_structures(limit: int = 4) -> list[tuple[str, ...]]:
    """Every valid structure of up to ``limit`` submodels."""
    others = [k for k in kit.Submodel if k not in kit.MULTI_MASS]
    out = []
    for mass in sorted(kit.MULTI_MASS, key=lambda k: k.code):
        for r in range(limit):
            for extra in itertools.combinations(others, r):
                kinds = (mass, *extra)
                if kit.is_valid(kinds):
                    out.append(tuple(k.value for k in kinds))
    return out

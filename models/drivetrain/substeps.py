"""The RK4 step-size rule of the drive-train simulators (``models.drivetrain.simulate``).

Step-size rule (tanh friction and backlash make the ODE stiff; issue 26: it follows the
parameter point, not the box): with ``rho(p) = max |eig(d(Ax + Bu + f)/dx)|`` at the parameter
point ``p`` being simulated, estimated at rest (``x = 0``, where ``tanh'`` and the Stribeck
term are largest) and inside the backlash gap (where ``c/d`` acts), the substep count is

    n_sub = max(min_substeps, 2 ** ceil(log2(dt * rho(p) / 2.0)))

so that ``h * rho <= 2.0`` with ``h = dt / n_sub`` stays inside RK4's real-axis stability
interval (``2.785``) with margin for nonlinearity. Rounding up to a power of two keeps the
number of distinct simulators of a structure small (they are cached per structure, grid and
``n_sub``, :func:`get_simulator`) and makes "twice as many substeps" (the accuracy check by
step doubling, ``models.drivetrain.gp.evaluate``) land on the next cached one. One simulator
(one ``n_sub``) serves every parameter vector of a least-squares solve, so the objective stays
smooth within it; the fit re-checks the rule at its end point and refits with more substeps
when the point has become stiffer. The old rule took ``rho`` at the stiffest corner of the
parameter box (:func:`stiffness_bound`, kept for reports): with the wide boxes of issue 26
(inertia shares 1-99 %, friction 10x either side) that asked for hundreds of substeps at every
point of the box.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import casadi as ca
import numpy as np

from methods.errors import InputError
from models import budget
from models.drivetrain.kit import StateSpace

RK4_SAFE_H_RHO = 2.0

__all__ = [
    "RK4_SAFE_H_RHO", "explicit_substeps", "point_stiffness", "power_of_two", "rule_substeps",
    "stiffness_bound", "stiffness_reason", "substeps",
]  # fmt: skip


def _stiffness_states(model: StateSpace, p: np.ndarray) -> list[np.ndarray]:
    """The states the stiffness is estimated at: rest, and inside the backlash gap (half of
    ``alpha`` at ``p``: there ``lambda' = ... - (c/d) lambda``)."""
    states = [np.zeros(model.x.size1())]
    if "lambda" in model.state_names:
        inside = np.zeros(model.x.size1())
        inside[model.state_names.index("lambda")] = -p[model.param_names.index("alpha")]
        states.append(inside)
    return states


_JACOBIANS: dict[int, tuple[StateSpace, ca.Function]] = {}


def _state_jacobian(model: StateSpace) -> ca.Function:
    """``d rhs / dx (x, u, p)`` of ``model``, built once per model object."""
    hit = _JACOBIANS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    jac = ca.Function("jx", [model.x, model.u, model.p], [ca.jacobian(model.rhs(), model.x)])
    if len(_JACOBIANS) >= 512:
        _JACOBIANS.pop(next(iter(_JACOBIANS)))
    _JACOBIANS[id(model)] = (model, jac)  # the model is kept alive: its id stays unique
    return jac


def point_stiffness(model: StateSpace, p: np.ndarray | Mapping[str, float] | None = None) -> float:
    """``max |eig(df/dx)|`` at the parameter point ``p`` (a vector in the order of
    ``model.specs``, a mapping, or None: the nominals), at rest and inside the backlash gap;
    ``inf`` when the Jacobian is not finite there (e.g. ``f_tanh`` 1e308)."""
    pv = model.values(p) if p is None or isinstance(p, Mapping) else np.asarray(p, float)
    jac = _state_jacobian(model)
    with np.errstate(all="ignore"):
        mats = [np.asarray(jac(x, 0.0, pv)) for x in _stiffness_states(model, pv)]
    if not all(np.isfinite(m).all() for m in mats):
        return math.inf
    return float(max(np.max(np.abs(np.linalg.eigvals(m))) for m in mats))


def stiffness_bound(model: StateSpace) -> float:
    """The old rule's stiffness: :func:`point_stiffness` maximised greedily over the box's
    corners (nominal, then each parameter at its lower or upper value in turn). For reports;
    the step-size rule now follows the point (module docstring)."""
    p = np.array([s.nominal for s in model.specs])
    best = point_stiffness(model, p)
    for i, spec in enumerate(model.specs):
        for value in (spec.lower, spec.upper):
            trial = p.copy()
            trial[i] = value
            r = point_stiffness(model, trial)
            if r > best:
                best, p = r, trial
    return best


def power_of_two(needed: float) -> int:
    """The smallest power of two ``>= needed`` (1 for ``needed <= 1``)."""
    if needed <= 1:
        return 1
    return 1 << math.ceil(math.log2(needed) - 1e-12)


def substeps(
    model: StateSpace,
    dt: float,
    min_substeps: int = 1,
    p: np.ndarray | Mapping[str, float] | None = None,
) -> int:
    """Number of RK4 substeps per sample from the step-size rule at the parameter point ``p``
    (None: the nominals); a `models.budget.LimitError` naming the rule's numbers when it
    exceeds `GREYLAB_MAX_DRIVE_SUBSTEPS` (or is unbounded: a non-finite stiffness), before
    anything is built."""
    return rule_substeps(model, dt, min_substeps, p)[0]


def rule_substeps(
    model: StateSpace, dt: float, min_substeps: int, p: np.ndarray | Mapping | None = None
) -> tuple[int, float]:
    """``(n_sub, rho)``: the substep count within the limit and the stiffness behind it."""
    what = f"drive model {[k.value for k in model.structure]} at sample time {dt:g} s"
    budget.check_substeps(min_substeps, what, "the model's min_substeps")
    rho = point_stiffness(model, p)
    needed = dt * rho / RK4_SAFE_H_RHO if math.isfinite(rho) else math.inf
    budget.check_substeps(needed, what, stiffness_reason(model, dt, rho, p))
    n_sub = max(int(min_substeps), power_of_two(needed))
    budget.check_substeps(n_sub, what, stiffness_reason(model, dt, rho, p))
    return n_sub, rho


def stiffness_reason(
    model: StateSpace, dt: float, rho: float, p: np.ndarray | Mapping | None = None
) -> str:
    """Why the step-size rule asks for many substeps: its numbers, the point and the box."""
    pv = model.values(p) if p is None or isinstance(p, Mapping) else np.asarray(p, float)
    point = ", ".join(f"{s.name} {v:.3g}" for s, v in zip(model.specs, pv, strict=True))
    box = ", ".join(f"{s.name} {s.lower:.3g}..{s.upper:.3g}" for s in model.specs)
    return (
        f"step-size rule n_sub = 2^ceil(log2(dt * rho / {RK4_SAFE_H_RHO:g})) with the stiffest "
        f"eigenvalue at the parameter point rho = {rho:.3g} 1/s (f_tanh {model.f_tanh:g}; "
        f"point {point[:300]}; box {box[:300]}): a near-zero inertia, a huge stiffness or "
        "friction gain, or a sample time in the wrong unit makes the drive this stiff"
    )


def explicit_substeps(
    model: StateSpace, dt: float, n_sub: int, min_substeps: int, at: np.ndarray | Mapping | None
) -> tuple[int, float]:
    """An explicit substep count (at least ``min_substeps``), checked against the limit."""
    what = f"drive model {[k.value for k in model.structure]} at sample time {dt:g} s"
    if isinstance(n_sub, bool) or not isinstance(n_sub, int | np.integer) or n_sub < 1:
        raise InputError(f"{what}: n_sub must be an integer >= 1, got {n_sub!r}")
    n = max(int(n_sub), int(min_substeps))
    if n > budget.limit(budget.MAX_SUBSTEPS):
        rho = point_stiffness(model, at)
        budget.check_substeps(n, what, "requested (accuracy or stability re-check); "
                              + stiffness_reason(model, dt, rho, at))  # fmt: skip
    return n, math.nan

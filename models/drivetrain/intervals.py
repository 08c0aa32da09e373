"""Parameter uncertainty of an output-error estimate: standard errors, marginal and
simultaneous intervals, identifiability flags (pure statistics on arrays; part of the evidence,
``models.drivetrain.evidence``, docs/methods.md §2.9).

The linearised covariance of the output-error estimate from the exact Jacobian
``J = dy_sim/dp`` at the estimate. Without a prefilter ``cov = s^2 (J^T J)^-1``; with the
search's zero-phase prefilter ``F`` (the estimate minimises ``|F(y_sim - y)|^2``) the sandwich
``s^2 A^-1 B A^-1``, ``A = (FJ)^T FJ``, ``B = (FJ)^T F F^T (FJ)`` (``F^T`` by :func:`filter_adjoint`: the padding at the record's
ends makes ``F`` far from symmetric there). ``s^2 = e^T e / (N - d)`` from the
raw residual ``e = y_sim - y``. A start velocity estimated from the same noisy velocity
samples (``start``) moves the fit with its own error: the covariance propagates it, the
``B`` term with ``(I - j0 c^T)``. Intervals: ``value +- t_{0.975, N-d} stderr``; the
simultaneous ones (``joint_lower``, ``joint_upper``) with Bonferroni's ``t_{1-0.025/m}``
over the ``m`` determined parameters, so that every true value lies inside its joint
interval with at least 95 % (each marginal one alone: 95 %, all ``d`` of them together
about ``0.95^d`` when they are independent). A parameter is flagged not identifiable when
the scaled Jacobian is rank deficient in its direction (singular value below ``RANK_TOL`` of
the largest) or its interval is wider than its box.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

FULL_ADJOINT = 2500  # records up to this length get the prefilter's adjoint from all of F
MAX_EDGE = 2048  # longest end window (samples) of the prefilter's exact adjoint
RANK_TOL = 1e-8  # relative singular value below which a direction is not identifiable


@dataclass(frozen=True)
class ParameterInterval:
    """One parameter: estimate, standard error, interval at ``level``, its box and the
    identifiability flag (``note`` says why not, or that it sits on a bound); ``joint_lower``,
    ``joint_upper``: the simultaneous interval (module docstring), NaN until computed."""

    name: str
    value: float
    stderr: float
    lower: float
    upper: float
    box: tuple[float, float]
    identifiable: bool
    note: str = ""
    joint_lower: float = math.nan
    joint_upper: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["box"] = list(self.box)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in out.items()}  # fmt: skip


def parameter_uncertainty(
    jacobian: np.ndarray,
    residual: np.ndarray,
    values: np.ndarray,
    names: Sequence[str],
    boxes: Sequence[tuple[float, float]],
    *,
    prefilter: Callable[[np.ndarray], np.ndarray] | None = None,
    level: float = 0.95,
    notes: list[str] | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[ParameterInterval], float, float]:
    """Standard errors and ``level`` intervals of an output-error estimate (module docstring).

    ``jacobian`` (N, d): ``dy_sim/dp`` at ``values``; ``residual`` (N,): ``y_sim - y``.
    ``start``: ``(j0, c)`` when the simulation starts from a velocity estimated from the same
    noisy samples, ``c @ y[:c.size]`` (``gp.signals.initial_velocity_weights``), ``j0`` (N,)
    the output's sensitivity to it: that estimate's error moves the fit too (with the
    prefilter ``F``, ``dp = A^-1 (FJ)^T F (I - j0 c^T) noise``), and the covariance carries it.
    Returns (intervals, residual standard deviation ``s``, condition number of the Jacobian
    with columns scaled to the parameters' magnitudes); ``notes`` gets a line when the
    prefilter's adjoint was approximated (:func:`filter_adjoint`)."""
    jac = np.asarray(jacobian, float)
    e = np.asarray(residual, float)
    n, d = jac.shape
    values = np.asarray(values, float)
    width = np.array([hi - lo for lo, hi in boxes], float)
    scale = np.where(values != 0.0, np.abs(values), np.maximum(width, 1e-300))
    s2 = float(e @ e) / max(n - d, 1)
    js = jac * scale
    jf = prefilter(js) if prefilter is not None else js
    _, sing, vt = np.linalg.svd(jf, full_matrices=False)
    cond = float(sing[0] / sing[-1]) if sing[-1] > 0 else math.inf
    keep = sing > RANK_TOL * sing[0] if sing[0] > 0 else np.zeros(d, bool)
    inv_a = (vt[keep].T / sing[keep] ** 2) @ vt[keep]  # pseudo-inverse of A (scaled)
    g = js  # dp = A^-1 g^T noise; B = g^T g (A itself without a prefilter or a start term)
    if prefilter is not None:  # B = (FJ)^T F F^T (FJ) = |F^T (FJ)|^2
        g, exact = filter_adjoint(prefilter, jf)
        if not exact and notes is not None:
            notes.append("the prefilter reaches far into the record: its adjoint approximated "
                         "by itself (intervals may be up to a quarter too narrow)")  # fmt: skip
    if start is not None:  # the start velocity's own noise: g^T (I - j0 c^T)
        j0, c = np.asarray(start[0], float), np.asarray(start[1], float)
        g = g.copy()
        g[: c.size] -= np.outer(c, j0[:n] @ g)
    sandwich = prefilter is not None or start is not None
    cov = s2 * inv_a @ (g.T @ g) @ inv_a if sandwich else s2 * inv_a
    stderr = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * scale
    # a parameter with a component along a dropped (near-null) direction is not determined
    null = vt[~keep]
    weak = (np.abs(null) > 1e-3).any(axis=0) if null.size else np.zeros(d, bool)
    t = float(stats.t.ppf(0.5 + level / 2.0, max(n - d, 1)))
    m = max(int(np.sum(~weak)), 1)  # Bonferroni over the determined parameters
    t_joint = float(stats.t.ppf(1.0 - (1.0 - level) / (2.0 * m), max(n - d, 1)))
    out = []
    for i, name in enumerate(names):
        lo, hi = boxes[i]
        se = math.inf if weak[i] else float(stderr[i])
        note = ""
        if weak[i]:
            note = "not identifiable: the data do not separate it (rank-deficient Jacobian)"
        elif 2.0 * t * se > hi - lo:
            note = "not identifiable: its interval is wider than its box"
        elif at_bound(values[i], (lo, hi)):
            note = "at a bound of its box: the interval assumes an interior optimum"
        out.append(ParameterInterval(
            name=str(name), value=float(values[i]), stderr=se, lower=float(values[i] - t * se),
            upper=float(values[i] + t * se), box=(float(lo), float(hi)),
            identifiable=not note.startswith("not identifiable"), note=note,
            joint_lower=float(values[i] - t_joint * se),
            joint_upper=float(values[i] + t_joint * se),
        ))  # fmt: skip
    return out, math.sqrt(s2), cond


def at_bound(value: float, box: tuple[float, float]) -> bool:
    """Whether ``value`` sits on a bound of ``box`` (within 1e-6 of its width)."""
    lo, hi = box
    return min(value - lo, hi - value) <= 1e-6 * (hi - lo)


def filter_adjoint(
    prefilter: Callable[[np.ndarray], np.ndarray], w: np.ndarray
) -> tuple[np.ndarray, bool]:
    """(``F^T w``, exact) for the linear map ``F`` (along axis 0) of a zero-phase filter: its
    kernel is symmetric, so ``F^T w = F w`` except within the filter's reach of the record's
    ends, where the padding breaks the symmetry (``sosfiltfilt``: up to 0.9 of a unit impulse);
    those rows are exact, from ``F`` of unit impulses on a window at either end (all of ``F``
    for records up to ``FULL_ADJOINT`` samples). A filter whose reach passes ``MAX_EDGE``
    samples or a third of the record gets ``F w`` (exact False: the intervals approximate)."""
    n = w.shape[0]
    if n <= FULL_ADJOINT:
        return prefilter(np.eye(n)).T @ w, True
    m = min(n, 4 * MAX_EDGE)
    impulse = np.zeros(m)
    impulse[m // 2] = 1.0
    h = np.abs(prefilter(impulse))
    reach = int(np.max(np.abs(np.flatnonzero(h > 1e-12 * h.max()) - m // 2)))
    edge = 2 * reach + 64
    out = prefilter(w)
    if edge > MAX_EDGE or 3 * edge > n:
        return out, False
    eye = np.zeros((3 * edge, edge))
    eye[np.arange(edge), np.arange(edge)] = 1.0
    out[:edge] = prefilter(eye).T @ w[: 3 * edge]
    out[-edge:] = prefilter(eye[::-1, ::-1]).T @ w[-3 * edge :]
    return out, True

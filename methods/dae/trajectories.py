"""Demanded output trajectories gamma(t) with analytic derivatives of any order.

Every trajectory implements ``derivatives(t, order) -> ndarray (order + 1, len(t))`` (row ``j``
is the ``j``-th time derivative) and reports its smoothness: ``continuity()`` returns the
largest ``r`` such that the trajectory is ``C^r`` everywhere (``math.inf`` for polynomials),
together with the time where the first derivative of order ``r + 1`` jumps.

Rest-to-rest smooth step of degree ``2r + 1`` on normalised time ``tau = (t - t0)/(t1 - t0)``:

    S_r(tau) = tau^(r+1) * sum_{j=0}^{r} binom(r + j, j) (1 - tau)^j

(degree 9, r = 4: ``126 tau^5 - 420 tau^6 + 540 tau^7 - 315 tau^8 + 70 tau^9``). ``S_r`` has
``r`` vanishing derivatives at both ends, so a step is ``C^r``: degree 9 is ``C^4`` (the
controls of the systems here need ``gamma''''``), degree 7 only ``C^3``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.polynomial import polynomial as P

from methods.errors import InputError

__all__ = [
    "Constant",
    "Piecewise",
    "Polynomial",
    "SmoothStep",
    "Steps",
    "Sum",
    "Trajectory",
    "VelocityStep",
    "smooth_step_coefficients",
]

_JUMP_RTOL = 1e-7  # relative size of a derivative jump (vs. its scale) counted as a jump


def smooth_step_coefficients(degree: int) -> np.ndarray:
    """Power-series coefficients (ascending) of the rest-to-rest step of odd ``degree >= 3``."""
    if not isinstance(degree, int | np.integer) or degree < 3 or degree % 2 == 0:
        raise InputError(f"smooth step degree must be an odd integer >= 3, got {degree!r}")
    r = (degree - 1) // 2
    poly = np.zeros(1)
    one_minus = np.array([1.0, -1.0])
    for j in range(r + 1):
        poly = P.polyadd(poly, math.comb(r + j, j) * P.polypow(one_minus, j))
    return P.polymul(np.r_[np.zeros(r + 1), 1.0], poly)


class Trajectory:
    """Base class: a scalar function of time with analytic derivatives."""

    def derivatives(self, t: np.ndarray, order: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def continuity(self) -> tuple[float, float | None]:
        """``(r, t_jump)``: the trajectory is ``C^r``; derivative ``r + 1`` jumps at ``t_jump``."""
        return math.inf, None

    def events(self) -> list[float]:
        """Times where something starts or stops (used for default horizons)."""
        return []

    def __call__(self, t: np.ndarray | float) -> np.ndarray:
        return self.derivatives(np.atleast_1d(np.asarray(t, float)), 0)[0]


@dataclass(frozen=True)
class Constant(Trajectory):
    value: float

    def derivatives(self, t, order):
        out = np.zeros((order + 1, np.size(t)))
        out[0] = self.value
        return out


@dataclass(frozen=True)
class Polynomial(Trajectory):
    """``sum_i coefficients[i] * (t - t_ref)^i`` (SI units of the output per s^i)."""

    coefficients: tuple[float, ...]
    t_ref: float = 0.0

    def derivatives(self, t, order):
        c = np.asarray(self.coefficients, float)
        out = np.empty((order + 1, np.size(t)))
        for j in range(order + 1):
            out[j] = P.polyval(np.asarray(t) - self.t_ref, c) if c.size else 0.0
            c = P.polyder(c) if c.size > 1 else np.zeros(1)
        return out


def _centred(coef: np.ndarray) -> np.polynomial.Polynomial:
    """Same polynomial, stored in ``sigma = 2 tau - 1``: far smaller coefficients, so far less
    cancellation (the controls are second differences of positions: noise / h^2 matters)."""
    return np.polynomial.Polynomial(coef).convert(domain=[0.0, 1.0], window=[-1.0, 1.0])


def _normalised_profile_derivatives(poly, t, t0, t1, order, hold_slope=False):
    """Derivatives of ``p((t - t0)/T)`` w.r.t. t, held constant (or linear) outside [t0, t1]."""
    T = t1 - t0
    t = np.asarray(t, float)
    tau = np.clip((t - t0) / T, 0.0, 1.0)
    out = np.empty((order + 1, t.size))
    outside = (t < t0) | (t > t1)
    for j in range(order + 1):
        out[j] = poly.deriv(j)(tau) / T**j if j <= poly.degree() else 0.0
        if j >= 1:  # held constant outside [t0, t1]
            out[j, outside] = 0.0
    if hold_slope:  # beyond t1 the value keeps growing with the final slope
        after = t > t1
        slope = poly.deriv(1)(1.0) / T
        out[0, after] += slope * (t[after] - t1)
        if order >= 1:
            out[1, after] = slope
    return out


@dataclass(frozen=True)
class SmoothStep(Trajectory):
    """Rest-to-rest step from ``start`` to ``end`` during ``[t0, t1]`` (s), odd ``degree``."""

    start: float
    end: float
    t0: float
    t1: float
    degree: int = 9
    _coef: np.polynomial.Polynomial = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not self.t1 > self.t0:
            raise InputError(f"smooth step needs t1 > t0, got t0={self.t0}, t1={self.t1}")
        object.__setattr__(self, "_coef", _centred(smooth_step_coefficients(self.degree)))

    def derivatives(self, t, order):
        out = (self.end - self.start) * _normalised_profile_derivatives(
            self._coef, t, self.t0, self.t1, order
        )
        out[0] += self.start
        return out

    def continuity(self):
        if self.end == self.start:
            return math.inf, None
        return (self.degree - 1) // 2, self.t0

    def events(self):
        return [self.t0, self.t1]


@dataclass(frozen=True)
class VelocityStep(Trajectory):
    """Position whose velocity steps smoothly from ``v_start`` to ``v_end`` during [t0, t1].

    ``x(t) = x0 + v_start (t - t_ref) + (v_end - v_start) (t1 - t0) I((t - t0)/(t1 - t0))``
    with ``I`` the integral of the smooth step (units: output, output/s).
    """

    v_start: float
    v_end: float
    t0: float
    t1: float
    x0: float = 0.0
    t_ref: float = 0.0
    degree: int = 9
    _coef: np.polynomial.Polynomial = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not self.t1 > self.t0:
            raise InputError(f"velocity step needs t1 > t0, got t0={self.t0}, t1={self.t1}")
        object.__setattr__(
            self, "_coef", _centred(P.polyint(smooth_step_coefficients(self.degree)))
        )

    def derivatives(self, t, order):
        T = self.t1 - self.t0
        out = (
            (self.v_end - self.v_start)
            * T
            * _normalised_profile_derivatives(
                self._coef, t, self.t0, self.t1, order, hold_slope=True
            )
        )
        t = np.asarray(t, float)
        out[0] += self.x0 + self.v_start * (t - self.t_ref)
        if order >= 1:
            out[1] += self.v_start
        return out

    def continuity(self):
        if self.v_end == self.v_start:
            return math.inf, None
        return (self.degree - 1) // 2 + 1, self.t0

    def events(self):
        return [self.t0, self.t1]


@dataclass(frozen=True)
class Sum(Trajectory):
    """Sum of trajectories (e.g. a sequence of steps or a step on a ramp)."""

    terms: tuple[Trajectory, ...]

    def derivatives(self, t, order):
        out = np.zeros((order + 1, np.size(t)))
        for term in self.terms:
            out += term.derivatives(t, order)
        return out

    def continuity(self):
        worst: tuple[float, float | None] = (math.inf, None)
        for term in self.terms:
            c = term.continuity()
            if c[0] < worst[0] or (c[0] == worst[0] and c[1] is not None and worst[1] is None):
                worst = c
        return worst

    def events(self):
        return sorted({e for term in self.terms for e in term.events()})


def Steps(start: float, moves: list[tuple[float, float, float]], degree: int = 9) -> Sum:
    """Sequence of rest-to-rest moves ``(to, t0, t1)`` starting from ``start``."""
    terms: list[Trajectory] = [Constant(start)]
    here = start
    for to, t0, t1 in moves:
        terms.append(SmoothStep(0.0, to - here, t0, t1, degree))
        here = to
    return Sum(tuple(terms))


@dataclass(frozen=True)
class Piecewise(Trajectory):
    """Piece ``i`` applies on ``[breaks[i], breaks[i+1])`` (the first also before, the last after).

    Continuity at the joins is measured numerically: a derivative of order ``j`` jumps when the
    left and right values differ by more than ``1e-7`` of their scale.
    """

    breaks: tuple[float, ...]
    pieces: tuple[Trajectory, ...]
    max_order: int = 8

    def __post_init__(self):
        if len(self.breaks) != len(self.pieces) or not self.pieces:
            raise InputError("piecewise demand: need one start time per piece (at least one)")
        if any(b2 <= b1 for b1, b2 in zip(self.breaks, self.breaks[1:])):
            raise InputError(
                f"piecewise demand: piece start times must increase, got {self.breaks}"
            )

    def derivatives(self, t, order):
        t = np.asarray(t, float)
        idx = np.clip(np.searchsorted(self.breaks, t, side="right") - 1, 0, len(self.pieces) - 1)
        out = np.empty((order + 1, t.size))
        for i, piece in enumerate(self.pieces):
            sel = idx == i
            if sel.any():
                out[:, sel] = piece.derivatives(t[sel], order)
        return out

    def continuity(self):
        worst: tuple[float, float | None] = (math.inf, None)
        for piece in self.pieces:
            c = piece.continuity()
            if c[0] < worst[0]:
                worst = c
        for tb, left, right in zip(self.breaks[1:], self.pieces, self.pieces[1:]):
            dl = left.derivatives(np.array([tb]), self.max_order)[:, 0]
            dr = right.derivatives(np.array([tb]), self.max_order)[:, 0]
            for j in range(self.max_order + 1):
                scale = max(1.0, abs(dl[j]), abs(dr[j]))
                if abs(dl[j] - dr[j]) > _JUMP_RTOL * scale:
                    if j - 1 < worst[0]:
                        worst = (j - 1, tb)
                    break
        return worst

    def events(self):
        ev = set(self.breaks)
        for p in self.pieces:
            ev.update(p.events())
        return sorted(ev)

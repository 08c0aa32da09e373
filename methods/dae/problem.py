"""Servo-constraint problems: declare with CasADi symbols, then ``setup()`` validates and freezes.

Equations of motion (docs/methods.md §3 sign convention; ``n`` coordinates, ``m < n`` controls)::

    q' = A(q) v                              (A = I unless set_kinematics is called)
    M(q) v' + d(q, v) = f(q, v) - B(q, v)^T u
    0  = Phi(q) - gamma(t)                   (m servo-constraints, the demanded outputs)

``d`` holds the inertial (Coriolis/centrifugal) terms, ``f`` the applied forces. Instead of
``B`` one may give the natural input matrix ``G`` (generalised actuation force ``= G u``), then
``B = -G^T``. ``B`` may depend on ``v`` (ship rudder, aircraft surfaces scale with speed^2).

The constraint matrix in velocity space is ``C_v = dPhi/dq A`` (m x n) and
``xi = gamma'' - (d/dt C_v) v``. ``setup`` checks, at the nominal coordinates,
``rank([C_v; B]) = n`` and reports ``p = rank(C_v M^-1 B^T)`` (expected ``2m - n``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import casadi as ca
import numpy as np

from methods.errors import InputError

__all__ = ["InverseProblemError", "RankInfo", "RankPolicy", "ServoProblem"]

_RANK_RTOL = 1e-9  # singular values below this fraction of the largest count as zero


class InverseProblemError(InputError):
    """The inverse problem cannot be solved as posed; ``time`` (s) says where, if known."""

    def __init__(self, message: str, time: float | None = None):
        super().__init__(message)
        self.time = time


class RankPolicy(StrEnum):
    """What ``setup`` does when ``rank([C; B]) < n``: raise (``strict``) or only report."""

    STRICT = "strict"
    REPORT = "report"


@dataclass(frozen=True)
class RankInfo:
    """Rank conditions at one state: ``rank([C; B])`` (should be ``n``), ``p = rank(C M^-1 B^T)``."""

    n: int
    m: int
    rank_CB: int
    p: int
    where: str

    @property
    def p_expected(self) -> int:
        return 2 * self.m - self.n

    @property
    def ok(self) -> bool:
        return self.rank_CB == self.n

    def summary(self) -> str:
        flag = "ok" if self.ok else "FAILS"
        return (
            f"rank([C;B]) = {self.rank_CB} (n = {self.n}, {flag}); p = rank(C M^-1 B^T) = "
            f"{self.p} (2m - n = {self.p_expected}) at {self.where}"
        )

    def to_dict(self) -> dict:
        return {
            "n": self.n,
            "m": self.m,
            "rank_CB": self.rank_CB,
            "p": self.p,
            "p_expected": self.p_expected,
            "ok": self.ok,
            "where": self.where,
        }


def _rank(a: np.ndarray) -> int:
    s = np.linalg.svd(np.atleast_2d(a), compute_uv=False)
    return int(np.sum(s > _RANK_RTOL * max(s.max(initial=0.0), 1e-300)))


def _as_sx(name: str, expr, shape: tuple[int, int]) -> ca.SX:
    e = ca.SX(expr) if not isinstance(expr, ca.SX) else expr
    if e.shape != shape:
        if e.shape == shape[::-1] and 1 in shape:
            e = e.T
        else:
            raise InputError(f"{name} must have shape {shape}, got {e.shape}")
    return e


class ServoProblem:
    """Inverse-dynamics problem in partly specified motion (declare, then ``setup()``).

    Example::

        pb = ServoProblem("two_mass")
        x = pb.coordinates(["x1", "x2"], nominal=[0.0, 1.0])
        v = pb.velocities
        F = pb.controls(["F"])
        pb.set_dynamics(M=ca.diag(ca.vertcat(m1, m2)), f=..., G=ca.DM([[1], [0]]))
        pb.set_outputs(x[1], ["x2"])
        pb.setup()
    """

    _compiled: dict  # compiled solver functions, cached by methods.dae.inverse

    def __init__(self, name: str):
        self.name = name
        self._frozen = False
        self.q: ca.SX | None = None
        self.v: ca.SX | None = None
        self.u: ca.SX | None = None
        self.coordinate_names: tuple[str, ...] = ()
        self.velocity_names: tuple[str, ...] = ()
        self.control_names: tuple[str, ...] = ()
        self.output_names: tuple[str, ...] = ()
        self.q_nominal = np.zeros(0)
        self.v_nominal = np.zeros(0)
        self.bounds: dict[str, tuple[float, float]] = {}
        self.M: ca.SX | None = None
        self.d: ca.SX | None = None
        self.f: ca.SX | None = None
        self.B: ca.SX | None = None
        self.A: ca.SX | None = None
        self.Phi: ca.SX | None = None
        self.demand_order = 4
        self.rank_policy = RankPolicy.STRICT
        self.rank_info: RankInfo | None = None
        #: consistent start also requires d/dt(force) = 0 (methods/dae/start.py; lab systems)
        self.steady_closure = False

    # -- declaration -------------------------------------------------------------------------
    def _check_open(self):
        if self._frozen:
            raise InputError(f"problem {self.name!r} is set up (frozen); declare a new one")

    def coordinates(
        self,
        names: Sequence[str],
        nominal: Sequence[float] | None = None,
        velocity_names: Sequence[str] | None = None,
        bounds: dict[str, tuple[float, float]] | None = None,
        v_nominal: Sequence[float] | None = None,
    ) -> ca.SX:
        """Declare the ``n`` coordinates (and their velocities ``v_<name>`` unless named)."""
        self._check_open()
        n = len(names)
        if n == 0 or len(set(names)) != n:
            raise InputError(f"coordinate names must be unique and non-empty, got {names}")
        self.coordinate_names = tuple(names)
        self.velocity_names = tuple(velocity_names or [f"v_{s}" for s in names])
        if len(self.velocity_names) != n:
            raise InputError("need one velocity name per coordinate")
        self.q = ca.SX.sym("q", n)
        self.v = ca.SX.sym("v", n)
        self.q_nominal = np.zeros(n) if nominal is None else np.asarray(nominal, float)
        self.v_nominal = np.zeros(n) if v_nominal is None else np.asarray(v_nominal, float)
        for key in bounds or {}:
            if key not in names:
                raise InputError(f"bounds given for unknown coordinate {key!r}")
        self.bounds = dict(bounds or {})
        return self.q

    @property
    def velocities(self) -> ca.SX:
        if self.v is None:
            raise InputError("declare coordinates first")
        return self.v

    def controls(self, names: Sequence[str]) -> ca.SX:
        """Declare the ``m`` controls."""
        self._check_open()
        if not names or len(set(names)) != len(names):
            raise InputError(f"control names must be unique and non-empty, got {names}")
        self.control_names = tuple(names)
        self.u = ca.SX.sym("u", len(names))
        return self.u

    def set_dynamics(self, *, M, f, d=None, B=None, G=None) -> None:
        """``M v' + d = f - B^T u`` (or ``G u`` as actuation force with ``B = -G^T``)."""
        self._check_open()
        if self.q is None or self.u is None:
            raise InputError("declare coordinates and controls before the dynamics")
        n, m = self.q.numel(), self.u.numel()
        self.M = _as_sx("M", M, (n, n))
        self.f = _as_sx("f", f, (n, 1))
        self.d = _as_sx("d", ca.SX.zeros(n, 1) if d is None else d, (n, 1))
        if (B is None) == (G is None):
            raise InputError("give exactly one of B (m x n) or G (n x m)")
        self.B = _as_sx("B", B, (m, n)) if B is not None else -_as_sx("G", G, (n, m)).T

    def set_kinematics(self, A) -> None:
        """Kinematic form ``q' = A(q) v`` (ships, aircraft); default ``A = I``."""
        self._check_open()
        if self.q is None:
            raise InputError("declare coordinates first")
        n = self.q.numel()
        self.A = _as_sx("A", A, (n, n))

    def set_outputs(self, Phi, names: Sequence[str], demand_order: int = 4) -> None:
        """Demanded outputs ``Phi(q)`` (m). ``demand_order``: derivative of gamma the controls
        need (4 for the systems of the paper, ``2N`` for a chain of ``N`` masses)."""
        self._check_open()
        m = self.u.numel() if self.u is not None else None
        if m is None:
            raise InputError("declare controls before outputs")
        self.Phi = _as_sx("Phi", Phi, (m, 1))
        if len(names) != m or len(set(names)) != m:
            raise InputError(f"need {m} unique output names (one per control), got {names}")
        self.output_names = tuple(names)
        self.demand_order = int(demand_order)

    # -- set up ------------------------------------------------------------------------------
    def setup(self, rank_policy: RankPolicy | str = RankPolicy.STRICT) -> ServoProblem:
        """Validate, build the functions, check the rank conditions at the nominal state."""
        self._check_open()
        q, v, u = self.q, self.v, self.u
        dynamics = (self.M, self.f, self.Phi)
        if q is None or v is None or u is None or any(x is None for x in dynamics):
            raise InputError(
                f"problem {self.name!r}: declare coordinates, controls, dynamics, outputs"
            )
        n, m = q.numel(), u.numel()
        if not m < n:
            raise InputError(
                f"problem {self.name!r}: need fewer controls than coordinates ({m} >= {n})"
            )
        names = self.coordinate_names + self.velocity_names + self.control_names
        if len(set(names)) != len(names) or "t_s" in names:
            raise InputError(
                f"names of coordinates, velocities and controls must be unique: {names}"
            )
        try:
            self.rank_policy = RankPolicy(rank_policy)
        except ValueError:
            raise InputError(
                f"rank_policy must be one of {[p.value for p in RankPolicy]}"
            ) from None
        if self.A is None:
            self.A = ca.SX.eye(n)
        free = set(
            ca.symvar(
                ca.vertcat(ca.vec(self.M), self.d, self.f, ca.vec(self.B), ca.vec(self.A), self.Phi)
            )
        )
        allowed = set(ca.symvar(ca.vertcat(self.q, self.v, self.u)))
        extra = {str(s) for s in free - allowed}
        if extra:
            raise InputError(
                f"problem {self.name!r}: unknown symbols {sorted(extra)} in the equations"
            )
        self.C = ca.jacobian(self.Phi, q)
        self.Cv = ca.mtimes(self.C, self.A)
        qdot = ca.mtimes(self.A, v)
        self.Cdot_v = ca.mtimes(ca.jacobian(ca.mtimes(self.Cv, v), q), qdot)
        self.fun_M = ca.Function("M", [q], [self.M])
        self.fun_mats = ca.Function("mats", [q, v], [self.Cv, self.B, self.M])
        self.fun_Phi = ca.Function("Phi", [q], [self.Phi])
        acc = ca.solve(self.M, self.generalized_force())
        self.fun_ode = ca.Function("ode", [q, v, u], [qdot, acc])
        self._frozen = True
        self.rank_info = self.rank_at(self.q_nominal, self.v_nominal, "nominal state")
        if not self.rank_info.ok and self.rank_policy is RankPolicy.STRICT:
            raise InverseProblemError(
                f"problem {self.name!r}: rank condition fails, {self.rank_info.summary()}. The "
                "controls and outputs do not span the configuration space: choose other "
                "outputs/inputs, or set rank_policy='report' for higher-index systems."
            )
        return self

    @property
    def n(self) -> int:
        if self.q is None:
            raise InputError("declare coordinates first")
        return self.q.numel()

    @property
    def m(self) -> int:
        if self.u is None:
            raise InputError("declare controls first")
        return self.u.numel()

    def generalized_force(self) -> ca.SX:
        """``f - d - B^T u`` (n x 1), the right-hand side of ``M v' = ...``."""
        if self.u is None or self.f is None or self.d is None or self.B is None:
            raise InputError(f"problem {self.name!r}: declare controls and dynamics first")
        return self.f - self.d - ca.mtimes(self.B.T, self.u)

    def rank_at(self, q: np.ndarray, v: np.ndarray | None = None, where: str = "") -> RankInfo:
        """Rank conditions evaluated at ``(q, v)``."""
        v = np.zeros(self.n) if v is None else v
        Cv, B, M = (np.asarray(x) for x in self.fun_mats(q, v))
        P = Cv @ np.linalg.solve(M, B.T)
        return RankInfo(self.n, self.m, _rank(np.vstack([Cv, B])), _rank(P), where or "given state")

    def describe(self) -> str:
        return (
            f"{self.name}: n = {self.n} ({', '.join(self.coordinate_names)}), m = {self.m} "
            f"controls ({', '.join(self.control_names)}), outputs ({', '.join(self.output_names)})"
        )

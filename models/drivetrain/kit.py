"""Construction kit: declare submodels, then ``setup()`` assembles the state space

    x' = A x + B u + f(x, u),        y = C x + D u + g(x, u)

with CasADi SX (A..D may depend on the parameter vector ``p``), in the paper's order:
multi-mass, friction, gravity, backlash, I/O selection, current control, delay.

States (in this order, those present): ``q1..qN`` [rad], ``dq1..dqN`` [rad/s], ``lambda``
[rad] (backlash), ``i_L`` [N m] (current-loop torque). Input ``u`` = motor torque [N m] at
inertia 1 (delayed by ``T_d`` when the delay submodel is present: the simulator applies
``u(t - T_d)``). Output ``y`` = velocity of inertia 1 [rad/s].

Deviation from the paper, on purpose: viscous friction ``-f_v dq1`` is linear and goes into
``A`` (the paper puts all friction into ``f``); Coulomb and Stribeck parts go into ``f``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from methods.errors import InputError
from models.drivetrain.submodels import (
    DEFAULT_F_TANH,
    MULTI_MASS,
    ParameterSpec,
    Submodel,
    codes,
    parameter_specs,
    parse_structure,
    positive_parameters,
)


@dataclass(frozen=True, eq=False)
class StateSpace:
    """An assembled drive-train model (symbolic in the estimated parameters ``p``).

    Fields: ``structure`` (canonical submodels), ``specs`` (one per entry of ``p``),
    ``x`` (n_x SX), ``u`` (1 SX), ``p`` (n_p SX), ``A`` (n_x x n_x), ``B`` (n_x x 1),
    ``C`` (1 x n_x), ``D`` (1 x 1), ``f`` (n_x), ``g`` (1), ``state_names``, ``f_tanh``.
    """

    structure: tuple[Submodel, ...]
    specs: tuple[ParameterSpec, ...]
    x: ca.SX
    u: ca.SX
    p: ca.SX
    A: ca.SX
    B: ca.SX
    C: ca.SX
    D: ca.SX
    f: ca.SX
    g: ca.SX
    state_names: tuple[str, ...]
    f_tanh: float
    backlash_smoothing: float = 0.0
    #: ``f`` with the gap state free of its walls (``lambda' = raw``): the exact gap law's
    #: flight between impacts (``models.drivetrain.gap`` locates the impacts); else None
    f_free: ca.SX | None = None

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    @property
    def has_delay(self) -> bool:
        return Submodel.DELAY in self.structure

    def rhs(self) -> ca.SX:
        """``A x + B u + f`` (n_x SX)."""
        return ca.mtimes(self.A, self.x) + ca.mtimes(self.B, self.u) + self.f

    def rhs_free(self) -> ca.SX:
        """``A x + B u + f_free``: the exact gap law in flight (no walls)."""
        assert self.f_free is not None, "only a model with the exact gap law has a flight law"
        return ca.mtimes(self.A, self.x) + ca.mtimes(self.B, self.u) + self.f_free

    def output(self) -> ca.SX:
        return ca.mtimes(self.C, self.x) + ca.mtimes(self.D, self.u) + self.g

    def function(self) -> ca.Function:
        """One CasADi function ``(x, u, p) -> (xdot, y)`` named after the paper's codes."""
        name = "drive_" + "_".join(str(c) for c in codes(self.structure))
        return ca.Function(
            name, [self.x, self.u, self.p], [self.rhs(), self.output()],
            ["x", "u", "p"], ["xdot", "y"],
        )  # fmt: skip

    def values(self, parameters: Mapping[str, float] | None = None) -> np.ndarray:
        """Parameter vector from a name->value mapping (missing names: nominal). A given value
        must be finite and, where the kit's quantity is positive (inertias, stiffnesses,
        friction, the gap, lags: all but the torque ``M_G``, of either sign, whatever box the
        user gave), > 0: a zero gap or a negative inertia is named here instead of simulating
        a machine that cannot exist."""
        parameters = parameters or {}
        unknown = set(parameters) - set(self.param_names)
        if unknown:
            raise InputError(f"unknown parameter(s) {sorted(unknown)} for {self.names()}")
        positive = positive_parameters(self.structure)
        for s in self.specs:
            if s.name in parameters:
                _check_value(s, parameters[s.name], s.name in positive)
        return np.array([float(parameters.get(s.name, s.nominal)) for s in self.specs])

    def names(self) -> list[str]:
        return [k.value for k in self.structure]

    def numeric(self, parameters: Mapping[str, float] | None = None) -> dict:
        """A, B, C, D as nested lists at the given values; f, g as strings (symbolic, with
        parameter names) and with the values substituted."""
        pv = self.values(parameters)
        fun = ca.Function("abcd", [self.p], [self.A, self.B, self.C, self.D])
        mats = [np.asarray(m, dtype=float).tolist() for m in fun(pv)]
        f_num = ca.substitute(self.f, self.p, ca.DM(pv))
        g_num = ca.substitute(self.g, self.p, ca.DM(pv))
        return {
            "structure_codes": codes(self.structure),
            "structure_names": self.names(),
            "states": list(self.state_names),
            "input": "u = motor torque at inertia 1 [N m]"
            + (" delayed: u(t - T_d)" if self.has_delay else ""),
            "output": "y = velocity of inertia 1 [rad/s]",
            "parameters": dict(zip(self.param_names, pv.tolist())),
            "f_tanh": self.f_tanh,
            "A": mats[0],
            "B": mats[1],
            "C": mats[2],
            "D": mats[3],
            "f": [str(e) for e in ca.vertsplit(self.f)],
            "g": [str(e) for e in ca.vertsplit(self.g)],
            "f_numeric": [str(e) for e in ca.vertsplit(f_num)],
            "g_numeric": [str(e) for e in ca.vertsplit(g_num)],
        }

    def to_dict(self, parameters: Mapping[str, float] | None = None) -> dict:
        return self.numeric(parameters)

    def summary(self) -> str:
        """A, B, C, D, f, g printed symbolically."""
        lines = [
            f"structure {codes(self.structure)} = {self.names()}",
            f"x = {list(self.state_names)}, u = motor torque, y = velocity of inertia 1",
            f"p = {list(self.param_names)}" + (" (input delayed by T_d)" if self.has_delay else ""),
        ]
        for label, mat in (("A", self.A), ("B", self.B), ("C", self.C), ("D", self.D)):
            lines.append(f"{label} =")
            lines += [
                f"  {[str(mat[i, j]) for j in range(mat.size2())]}" for i in range(mat.size1())
            ]
        lines.append("f =")
        lines += [f"  {e}" for e in ca.vertsplit(self.f)]
        lines.append(f"g = {[str(e) for e in ca.vertsplit(self.g)]}")
        return "\n".join(lines)


@dataclass
class DriveTrainKit:
    """Declare submodels with ``add``, then ``setup()`` validates and assembles.

    ``nominals``/``bounds`` override the parameter specs (per recording); ``f_tanh`` [s/rad]
    is the fixed tanh gain of Coulomb/Stribeck friction.
    """

    f_tanh: float = DEFAULT_F_TANH
    nominals: Mapping[str, float] | None = None
    bounds: Mapping[str, tuple[float, float]] | None = None
    _declared: list[Submodel] = field(default_factory=list)

    def add(self, *kinds: Submodel | str | int) -> DriveTrainKit:
        self._declared.extend(Submodel.parse(k) for k in kinds)
        return self

    def setup(self) -> StateSpace:
        return assemble(self._declared, f_tanh=self.f_tanh, nominals=self.nominals,
                        bounds=self.bounds)  # fmt: skip


#: The assembly steps of `assemble`, in their order; each submodel row (`submodels.KIT`) names
#: the step that adds it (`io`, the actuator and sensor at inertia 1, belongs to none).
STEPS = ("ladder", "friction", "gravity", "backlash", "io", "current_control", "delay")


def _check_value(spec: ParameterSpec, value: object, positive: bool) -> None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"parameter {spec.name}: {value!r} is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"parameter {spec.name}: {value!r} is not a finite number")
    if positive and not x > 0.0:
        raise InputError(f"parameter {spec.name} = {x:g}: {spec.description or spec.name} "
                         f"[{spec.unit}] must be > 0")  # fmt: skip


def _parameter_symbols(
    kinds: tuple[Submodel, ...],
    nominals: Mapping[str, float] | None,
    bounds: Mapping[str, tuple[float, float]] | None,
) -> tuple[list[ParameterSpec], dict[str, ca.SX]]:
    """The parameter specs of the submodels in order, and one SX symbol per parameter name."""
    specs: list[ParameterSpec] = []
    sym: dict[str, ca.SX] = {}
    for kind in kinds:
        for spec in parameter_specs(kind, nominals, bounds):
            specs.append(spec)
            sym[spec.name] = ca.SX.sym(spec.name)
    return specs, sym


def _multi_mass(n: int, sym: Mapping[str, ca.SX]) -> tuple[list[ca.SX], list[ca.SX], ca.SX, ca.SX]:
    """Step 1, the multi-mass ladder ``M q'' + Dm q' + K q = tau`` (tau: one torque per
    inertia): positions ``q``, velocities ``dq``, ``A`` (2N x 2N) and the torque input matrix
    ``BZ`` (2N x N)."""
    q = [ca.SX.sym(f"q{i}") for i in range(1, n + 1)]
    dq = [ca.SX.sym(f"dq{i}") for i in range(1, n + 1)]
    K, Dm = ca.SX.zeros(n, n), ca.SX.zeros(n, n)
    for i in range(n - 1):
        for mat, coef in ((K, sym[f"c{i + 1}"]), (Dm, sym[f"d{i + 1}"])):
            mat[i, i] += coef
            mat[i + 1, i + 1] += coef
            mat[i, i + 1] -= coef
            mat[i + 1, i] -= coef
    Minv = ca.diag(ca.vertcat(*[1.0 / sym[f"J{i}"] for i in range(1, n + 1)]))
    A = ca.vertcat(
        ca.horzcat(ca.SX.zeros(n, n), ca.SX.eye(n)),
        ca.horzcat(-ca.mtimes(Minv, K), -ca.mtimes(Minv, Dm)),
    )
    BZ = ca.vertcat(ca.SX.zeros(n, n), Minv)  # 2N x N, torque inputs per inertia
    return q, dq, A, BZ


def _coulomb_stribeck(
    kinds: tuple[Submodel, ...], sym: Mapping[str, ca.SX], dq1: ca.SX, f_tanh: float
) -> ca.SX | None:
    """Step 2, the nonlinear friction torque at inertia 1,
    ``-tanh(f_tanh dq1) (M_C + M_S exp(-|dq1|/dq0))`` with the parts present (None if
    neither Coulomb nor Stribeck friction is)."""
    if Submodel.COULOMB not in kinds and Submodel.STRIBECK not in kinds:
        return None
    sticky = ca.SX(0)
    if Submodel.COULOMB in kinds:
        sticky += sym["M_C"]
    if Submodel.STRIBECK in kinds:
        sticky += sym["M_S"] * ca.exp(-ca.fabs(dq1) / sym["dq0"])
    return -ca.tanh(f_tanh * dq1) * sticky


def _add_backlash(
    A: ca.SX, f: ca.SX, q: list[ca.SX], dq: list[ca.SX], sym: Mapping[str, ca.SX],
    smoothing: float = 0.0,
) -> tuple[ca.SX, ca.SX, ca.SX, ca.SX | None]:  # fmt: skip
    """Step 4, backlash between inertias 1 and 2: ``A`` and ``f`` extended by the gap state
    ``lambda`` (last row and column), and ``lambda``. ``smoothing`` = 0: the exact gap law
    (``lambda`` stops at the walls 0 and ``-2 alpha``); ``w = smoothing`` > 0: the walls as
    smooth steps of width ``w alpha``, ``lambda' = raw - H(lambda) max(0, raw) -
    H(-2 alpha - lambda) min(0, raw)``, ``H(s) = (1 + tanh(s / (w alpha))) / 2``: a model
    differentiable in its parameters, used only inside an identification's continuation
    (``models.drivetrain.gp.continuation``; it tends to the exact law as ``w -> 0``). The
    exact law also returns ``f`` in flight (``lambda' = raw``, no walls; else None)."""
    n = len(q)
    lam = ca.SX.sym("lambda")
    i1, i2, il = n, n + 1, 2 * n  # rows of dq1, dq2; column of lambda
    A = ca.blockcat([[A, ca.SX.zeros(2 * n, 1)], [ca.SX.zeros(1, 2 * n + 1)]])
    f = ca.vertcat(f, 0)
    A[i1, il] = A[i1, 1]  # spring feedback through lambda: reads the stiffness entries
    A[i2, il] = -A[i2, 0]
    c, d, alpha = sym["c1"], sym["d1"], sym["alpha"]
    delta, ddelta = q[0] - q[1], dq[0] - dq[1]
    raw = ddelta + c / d * (delta - lam)
    if smoothing > 0:
        width = smoothing * alpha
        upper = 0.5 * (1 + ca.tanh(lam / width))
        lower = 0.5 * (1 + ca.tanh(-(lam + 2 * alpha) / width))
        f_lam = raw - upper * ca.fmax(0, raw) - lower * ca.fmin(0, raw)
    else:
        f_lam = ca.if_else(
            lam >= 0, ca.fmin(0, raw), ca.if_else(lam <= -2 * alpha, ca.fmax(0, raw), raw)
        )
    flight = None if smoothing > 0 else _with_gap_rate(A, f, raw, n)
    return A, _with_gap_rate(A, f, f_lam, n), lam, flight


def _with_gap_rate(A: ca.SX, f: ca.SX, rate: ca.SX, n: int) -> ca.SX:
    """``f`` with the gap state's rate ``lambda' = rate`` and its damping feedback
    ``(d/J) rate`` into the rows of ``dq1`` and ``dq2``."""
    f = ca.SX(f)
    f[2 * n] += rate
    f[n] += A[n, n + 1] * rate
    f[n + 1] += -A[n + 1, n] * rate
    return f


def assemble(
    structure: Iterable[Submodel | str | int] | str,
    *,
    f_tanh: float = DEFAULT_F_TANH,
    nominals: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    backlash_smoothing: float = 0.0,
) -> StateSpace:
    """Assemble a valid structure into a :class:`StateSpace` (see module docstring;
    ``backlash_smoothing``: :func:`_add_backlash`, 0 = the exact gap law)."""
    kinds = parse_structure(structure)
    if not f_tanh > 0:
        raise InputError(f"f_tanh must be > 0, got {f_tanh!r}")
    if not backlash_smoothing >= 0:
        raise InputError(f"backlash_smoothing must be >= 0, got {backlash_smoothing!r}")
    specs, sym = _parameter_symbols(kinds, nominals, bounds)
    (multi,) = [k for k in kinds if k in MULTI_MASS]
    f_free = None
    n = multi.n_masses

    # 1. multi-mass ladder: M q'' + Dm q' + K q = tau (tau: one torque per inertia)
    q, dq, A, BZ = _multi_mass(n, sym)
    x_list, names = q + dq, [f"q{i}" for i in range(1, n + 1)] + [f"dq{i}" for i in range(1, n + 1)]
    f = ca.SX.zeros(2 * n, 1)

    # 2. friction at inertia 1: M_F = -f_v dq1 - tanh(f_tanh dq1) (M_C + M_S exp(-|dq1|/dq0))
    if Submodel.VISCOUS in kinds:  # linear: into A
        A[:, n] += BZ[:, 0] * (-sym["f_v"])
    sticky = _coulomb_stribeck(kinds, sym, dq[0], f_tanh)
    if sticky is not None:
        f += BZ[:, 0] * sticky

    # 3. gravity: constant torque at inertia 1
    if Submodel.GRAVITY in kinds:
        f += BZ[:, 0] * sym["M_G"]

    # 4. backlash between inertias 1 and 2 (seed eqs. 3-5, steps 1-5 of the paper)
    if Submodel.BACKLASH in kinds:
        A, f, lam, f_free = _add_backlash(A, f, q, dq, sym, backlash_smoothing)
        x_list.append(lam)
        names.append("lambda")

    # 5. I/O selection: actuator and sensor (velocity) at inertia 1
    nx = A.size1()
    B = ca.vertcat(BZ[:, 0], ca.SX.zeros(nx - 2 * n, 1))
    C = ca.SX.zeros(1, nx)
    C[0, n] = 1
    D = ca.SX.zeros(1, 1)
    g = ca.SX.zeros(1, 1)

    # 6. current control: PT1 in series at the input, state i_L = delivered torque
    if Submodel.CURRENT_CONTROL in kinds:
        t1 = sym["T_1"]
        i_l = ca.SX.sym("i_L")
        A = ca.blockcat([[A, B], [ca.SX.zeros(1, nx), -1.0 / t1]])
        B = ca.vertcat(ca.SX.zeros(nx, 1), 1.0 / t1)
        C = ca.horzcat(C, D)
        D = ca.SX.zeros(1, 1)
        f = ca.vertcat(f, 0)
        f_free = None if f_free is None else ca.vertcat(f_free, 0)
        x_list.append(i_l)
        names.append("i_L")

    # 7. delay: u(t - T_d) is applied by the simulator (linear interpolation); A..g unchanged
    return StateSpace(
        structure=kinds,
        specs=tuple(specs),
        x=ca.vertcat(*x_list),
        u=ca.SX.sym("u"),
        p=ca.vertcat(*[sym[s.name] for s in specs]),
        A=A, B=B, C=C, D=D, f=f, g=g,
        state_names=tuple(names),
        f_tanh=float(f_tanh),
        backlash_smoothing=float(backlash_smoothing) if Submodel.BACKLASH in kinds else 0.0,
        f_free=f_free,
    )  # fmt: skip

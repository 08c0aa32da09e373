"""Building blocks for underactuated systems: parameters, the System record, mechanics helpers.

Sign convention of every system here (docs/methods.md §3): ``M v' + d = f - B^T u`` with
``B = -G^T``, ``G`` the natural input matrix (generalised actuation force ``G u``); gravity
``g`` acts along ``-z``; angles in rad; SI units throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import casadi as ca
import numpy as np
import pandas as pd

from methods.dae import Demand, ServoProblem, parse_demand
from methods.errors import InputError

__all__ = [
    "Parameter",
    "System",
    "SystemSpec",
    "jet_derivative",
    "lagrange_terms",
    "point_kinetic_energy",
]


@dataclass(frozen=True)
class Parameter:
    name: str
    value: float
    unit: str
    description: str
    integer: bool = False
    positive: bool = True


@dataclass(frozen=True)
class System:
    """A built system: problem (set up), parameters (with overrides), default demand."""

    name: str
    description: str
    parameters: tuple[Parameter, ...]
    problem: ServoProblem = field(repr=False)
    default_demand: dict | None = field(repr=False)
    exact: Callable | None = field(default=None, repr=False)
    #: a lab's own system (models/underactuated/user.py): its `module:attr` reference, its own
    #: `name`; `strict_rank`: p = rank(C M^-1 B^T) != 2m - n at the start is an error
    reference: str | None = None
    user_name: str | None = None
    strict_rank: bool = False

    @property
    def params(self) -> dict[str, float]:
        return {p.name: p.value for p in self.parameters}

    def demand(self, spec: Mapping | None = None) -> Demand:
        chosen = self.default_demand if spec is None else spec
        if chosen is None:
            raise InputError(
                f"system {self.name!r} has no default_demand: give a demand (--demand FILE.yaml)"
            )
        return parse_demand(chosen, self.problem.output_names)

    def parameter_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [(p.name, p.value, p.unit, p.description) for p in self.parameters],
            columns=["name", "value", "unit", "description"],
        )

    def summary(self) -> str:
        lines = [f"{self.name}: {self.description}", f"  {self.problem.describe()}"]
        lines += [f"  {p.name} = {p.value:g} {p.unit}  ({p.description})" for p in self.parameters]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        pb = self.problem
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {p.name: {"value": p.value, "unit": p.unit} for p in self.parameters},
            "coordinates": list(pb.coordinate_names),
            "velocities": list(pb.velocity_names),
            "controls": list(pb.control_names),
            "outputs": list(pb.output_names),
            "has_exact_solution": self.exact is not None,
        } | ({} if self.reference is None else {
            "reference": self.reference, "user_name": self.user_name,
        })  # fmt: skip


@dataclass(frozen=True)
class SystemSpec:
    """Registry entry: parameters with defaults and a builder ``build(params) -> System``."""

    name: str
    description: str
    parameters: tuple[Parameter, ...]
    build: Callable[[str, str, tuple[Parameter, ...], dict[str, float]], System]

    def resolve(self, overrides: Mapping[str, float] | None) -> tuple[Parameter, ...]:
        known = {p.name: p for p in self.parameters}
        out = dict(known)
        for key, val in (overrides or {}).items():
            if key not in known:
                raise InputError(f"{self.name}: unknown parameter {key!r}; known: {sorted(known)}")
            try:
                x = float(val)
            except (TypeError, ValueError):
                raise InputError(f"{self.name}.{key}: expected a number, got {val!r}") from None
            p = known[key]
            if not math.isfinite(x) or (p.positive and x <= 0):
                raise InputError(
                    f"{self.name}.{key}: must be a finite positive number, got {val!r}"
                )
            if p.integer and x != int(x):
                raise InputError(f"{self.name}.{key}: must be an integer, got {val!r}")
            out[key] = Parameter(p.name, x, p.unit, p.description, p.integer, p.positive)
        return tuple(out[p.name] for p in self.parameters)

    def __call__(self, overrides: Mapping[str, float] | None = None) -> System:
        params = self.resolve(overrides)
        return self.build(self.name, self.description, params, {p.name: p.value for p in params})


def point_kinetic_energy(q: ca.SX, v: ca.SX, masses, positions, inertias=(), rates=()) -> ca.SX:
    """``T = sum 1/2 m |dp/dq v|^2 + sum 1/2 I w^2`` (``rates``: angular rates linear in v)."""
    T = 0
    for mass, pos in zip(masses, positions):
        vel = ca.mtimes(ca.jacobian(pos, q), v)
        T += 0.5 * mass * ca.dot(vel, vel)
    for inertia, w in zip(inertias, rates):
        T += 0.5 * inertia * w**2
    return T


def lagrange_terms(q: ca.SX, v: ca.SX, T: ca.SX, V: ca.SX):
    """``(M, d, f)`` from Lagrange's equations with ``q' = v``:
    ``M = d^2T/dv^2``, ``d = d(M v)/dq v - dT/dq``, ``f = -dV/dq``."""
    M = ca.hessian(T, v)[0]
    d = ca.mtimes(ca.jacobian(ca.mtimes(M, v), q), v) - ca.gradient(T, q)
    f = -ca.gradient(V, q)
    return ca.simplify(M), d, f


def jet_derivative(expr: ca.SX, jets: list[ca.SX]) -> ca.SX:
    """Time derivative of ``expr(jets)``; ``jets[i]`` holds an output and its derivatives
    ``(y, y', ..., y^(K))`` so ``d/dt`` shifts each jet by one (the last entry is dropped)."""
    out = 0
    for jet in jets:
        K = jet.numel()
        out += ca.mtimes(ca.jacobian(expr, jet[: K - 1]), jet[1:])
    return out


def eval_jets(fun: ca.Function, demand: Demand, names, t: np.ndarray, order: int) -> np.ndarray:
    """Evaluate ``fun(jet_1, ..., jet_m)`` column-wise on the demand's derivatives at ``t``."""
    g = demand.evaluate(names, t, order)  # (order+1, m, nt)
    f = fun.map(t.size)
    res = f(*[g[:, i, :] for i in range(len(names))])
    return np.asarray(res)

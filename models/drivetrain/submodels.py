"""The drive-train vocabulary: submodels, their parameters and the construction rules.

Paper codes (Tantau et al. 2019, docs/methods.md §2): 1 one-mass, 2 two-mass, 3 three-mass,
4 four-mass (rotary ladder ``J_i, c_i, d_i``; actuator and sensor at inertia 1), 5 Coulomb,
6 viscous, 7 Stribeck, 8 gravity (constant torque), 9 backlash (between inertias 1 and 2),
10 current control (PT1), 11 input delay.

Nominal values describe a small servo drive (motor inertia 10 g m^2, load twice that, a 14 Hz
shaft resonance); they are also the true values of the reference recording. Bounds are
50 %..200 % of nominal (the paper), except gravity whose range is symmetric about 0. For other
machines pass ``nominals`` (bounds follow as 50 %..200 %) and/or explicit ``bounds``.

Construction rules: each type at most once; exactly one multi-mass type; one-mass excludes
backlash.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from methods.errors import InputError


class Submodel(StrEnum):
    """Submodel types; ``.code`` is the paper's number."""

    ONE_MASS = "one_mass"
    TWO_MASS = "two_mass"
    THREE_MASS = "three_mass"
    FOUR_MASS = "four_mass"
    COULOMB = "coulomb"
    VISCOUS = "viscous"
    STRIBECK = "stribeck"
    GRAVITY = "gravity"
    BACKLASH = "backlash"
    CURRENT_CONTROL = "current_control"
    DELAY = "delay"

    @property
    def code(self) -> int:
        return _CODES[self]

    @property
    def n_masses(self) -> int:
        """Number of inertias for multi-mass types, 0 otherwise."""
        return _MASSES.get(self, 0)

    @classmethod
    def parse(cls, value: Submodel | str | int) -> Submodel:
        """Accept an Enum, its name (``"two_mass"``) or the paper code (``2`` or ``"2"``)."""
        if isinstance(value, Submodel):
            return value
        text = str(value).strip().lower()
        if text.isdigit():
            for kind, code in _CODES.items():
                if code == int(text):
                    return kind
            raise InputError(f"unknown submodel code {text!r} (valid: 1..11)")
        try:
            return cls(text)
        except ValueError:
            names = ", ".join(k.value for k in cls)
            raise InputError(f"unknown submodel {value!r} (valid: {names})") from None


_CODES = {kind: i + 1 for i, kind in enumerate(Submodel)}
_MASSES = {
    Submodel.ONE_MASS: 1,
    Submodel.TWO_MASS: 2,
    Submodel.THREE_MASS: 3,
    Submodel.FOUR_MASS: 4,
}
MULTI_MASS = frozenset(_MASSES)


@dataclass(frozen=True)
class ParameterSpec:
    """One estimation parameter: name, unit, nominal value and bounds ``lower <= p <= upper``."""

    name: str
    unit: str
    nominal: float
    lower: float
    upper: float
    description: str = ""

    def with_nominal(self, nominal: float) -> ParameterSpec:
        """Move the nominal; bounds become 50 %..200 % (symmetric ±2|nominal| if it spans 0)."""
        if not math.isfinite(nominal):
            raise InputError(f"nominal of {self.name} must be finite, got {nominal!r}")
        if self.lower < 0.0 < self.upper:
            half = 2.0 * abs(nominal) if nominal != 0.0 else self.upper
            return replace(self, nominal=nominal, lower=-half, upper=half)
        if nominal <= 0.0:
            raise InputError(f"nominal of {self.name} must be > 0, got {nominal!r}")
        return replace(self, nominal=nominal, lower=0.5 * nominal, upper=2.0 * nominal)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "nominal": self.nominal,
            "lower": self.lower,
            "upper": self.upper,
            "description": self.description,
        }


def _p(name: str, unit: str, nominal: float, description: str) -> ParameterSpec:
    return ParameterSpec(name, unit, nominal, 0.5 * nominal, 2.0 * nominal, description)


_INERTIA = {1: 0.01, 2: 0.02, 3: 0.02, 4: 0.02}  # kg m^2
_STIFFNESS = 50.0  # N m/rad
_DAMPING = 0.05  # N m s/rad


def _ladder(n: int) -> tuple[ParameterSpec, ...]:
    specs = [_p(f"J{i}", "kg m^2", _INERTIA[i], f"inertia {i}") for i in range(1, n + 1)]
    specs += [_p(f"c{i}", "N m/rad", _STIFFNESS, f"spring {i}-{i + 1}") for i in range(1, n)]
    specs += [_p(f"d{i}", "N m s/rad", _DAMPING, f"damper {i}-{i + 1}") for i in range(1, n)]
    return tuple(specs)


PARAMETERS: dict[Submodel, tuple[ParameterSpec, ...]] = {
    Submodel.ONE_MASS: _ladder(1),
    Submodel.TWO_MASS: _ladder(2),
    Submodel.THREE_MASS: _ladder(3),
    Submodel.FOUR_MASS: _ladder(4),
    Submodel.COULOMB: (_p("M_C", "N m", 0.2, "Coulomb friction torque"),),
    Submodel.VISCOUS: (_p("f_v", "N m s/rad", 0.01, "viscous friction coefficient"),),
    Submodel.STRIBECK: (
        _p("M_S", "N m", 0.15, "Stribeck torque (breakaway minus Coulomb)"),
        _p("dq0", "rad/s", 1.0, "Stribeck velocity"),
    ),
    Submodel.GRAVITY: (
        ParameterSpec("M_G", "N m", 0.0, -0.5, 0.5, "constant (gravity/offset) torque"),
    ),
    Submodel.BACKLASH: (_p("alpha", "rad", 0.005, "half backlash gap (gap = 2 alpha)"),),
    Submodel.CURRENT_CONTROL: (_p("T_1", "s", 0.002, "current-loop PT1 time constant"),),
    Submodel.DELAY: (_p("T_d", "s", 0.005, "input dead time"),),
}

#: Fixed (not estimated) constants of the kit: tanh gain of Coulomb/Stribeck friction [s/rad].
DEFAULT_F_TANH = 10.0


def parameter_specs(
    kind: Submodel | str,
    nominals: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
) -> tuple[ParameterSpec, ...]:
    """Parameter specs of one submodel, with optional per-recording nominals/bounds; a key
    ``"<submodel>.<name>"`` (e.g. ``"one_mass.J1"``) applies to that submodel only and wins
    over the plain name (a one-mass's inertia is the whole of it, a ladder's a share) unless
    the plain name has a nominal and no bounds: a value the user typed (its box follows)."""
    kind = Submodel.parse(kind)
    specs = []
    for spec in PARAMETERS[kind]:
        typed = spec.name in (nominals or {}) and spec.name not in (bounds or {})
        own = f"{kind.value}.{spec.name}"
        key_n = own if nominals and own in nominals and not typed else spec.name
        key_b = own if bounds and own in bounds and not typed else spec.name
        if nominals and key_n in nominals:
            spec = spec.with_nominal(float(nominals[key_n]))
        if bounds and key_b in bounds:
            lo, hi = (float(v) for v in bounds[key_b])
            if not (lo < hi) or not (lo <= spec.nominal <= hi):
                if not lo < hi:
                    raise InputError(f"bounds of {spec.name} must satisfy lower < upper")
                spec = replace(spec, nominal=min(max(spec.nominal, lo), hi))
            spec = replace(spec, lower=lo, upper=hi)
        specs.append(spec)
    return tuple(specs)


def canonical(structure: Iterable[Submodel | str | int]) -> tuple[Submodel, ...]:
    """Parse and sort a structure by paper code (duplicates are kept, for rule checks)."""
    return tuple(sorted((Submodel.parse(s) for s in structure), key=lambda k: k.code))


def rule_violations(structure: Iterable[Submodel | str | int]) -> list[str]:
    """Violated construction rules of a structure (empty list: valid)."""
    kinds = canonical(structure)
    problems = []
    seen = set()
    for kind in kinds:
        if kind in seen:
            problems.append(f"{kind.value} appears more than once")
        seen.add(kind)
    n_multi = sum(1 for k in kinds if k in MULTI_MASS)
    if n_multi != 1:
        problems.append(f"exactly one multi-mass type is required, found {n_multi}")
    if Submodel.ONE_MASS in seen and Submodel.BACKLASH in seen:
        problems.append("one_mass excludes backlash (backlash needs inertias 1 and 2)")
    return problems


def is_valid(structure: Iterable[Submodel | str | int]) -> bool:
    return not rule_violations(structure)


def can_add(structure: Iterable[Submodel], kind: Submodel) -> bool:
    """Whether adding ``kind`` keeps a partial structure free of violations (a multi-mass may
    still be missing)."""
    kinds = set(structure)
    if kind in kinds:
        return False
    if kind in MULTI_MASS and kinds & MULTI_MASS:
        return False
    if kind is Submodel.ONE_MASS and Submodel.BACKLASH in kinds:
        return False
    return not (kind is Submodel.BACKLASH and Submodel.ONE_MASS in kinds)


def parse_structure(structure: Iterable[Submodel | str | int] | str) -> tuple[Submodel, ...]:
    """Parse ``"two_mass,coulomb"`` / ``[2, 5]`` / names into a valid canonical structure."""
    if isinstance(structure, str):
        structure = [s for s in structure.replace(";", ",").split(",") if s.strip()]
    kinds = canonical(structure)
    problems = rule_violations(kinds)
    if problems:
        names = ",".join(k.value for k in kinds)
        raise InputError(f"invalid structure [{names}]: " + "; ".join(problems))
    return kinds


def codes(structure: Iterable[Submodel | str | int]) -> list[int]:
    return [k.code for k in canonical(structure)]


def names(structure: Iterable[Submodel | str | int]) -> list[str]:
    return [k.value for k in canonical(structure)]

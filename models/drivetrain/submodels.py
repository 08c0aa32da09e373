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

Everything about a submodel is one row of `KIT` (`SubmodelRow`): code, parameters, rules,
assembly step and the data preset's scale rule. Adding a submodel: an Enum member, its row, its
assembly step in `kit.assemble` (a new name in `kit.STEPS` when it needs one), its nominals in
`scales.Scales.nominals`, and its line in docs/methods.md §2.1;
`tests/models/drivetrain/test_submodel_table.py` fails while any of them is missing, and the
CLI (`--structure` accepts its name and code) and the Prefect form (the structure fields list
the Enum) pick it up.
"""

from __future__ import annotations

import math
import re
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
        shown = repr(text if len(text) <= 40 else text[:40] + "...")  # a crafted name's echo
        if text.isdigit():
            for kind, code in _CODES.items():
                if len(text) <= 4 and code == int(text):  # (int() refuses 4301 digits)
                    return kind
            valid = ", ".join(str(c) for c in sorted(_CODES.values()))
            raise InputError(f"unknown submodel code {shown} (valid: {valid})")
        try:
            return cls(text)
        except ValueError:
            names = ", ".join(k.value for k in cls)
            raise InputError(f"unknown submodel {shown} (valid: {names})") from None


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


@dataclass(frozen=True)
class SubmodelRow:
    """Everything about one submodel, in one place: the kit's table (`KIT`).

    `code`: the paper's number (explicit: never from the order of the Enum); `masses`: the
    inertias of a ladder (0 for the others; exactly one ladder per structure); `parameters`:
    its estimation parameters with the reference nominals and boxes; `excludes`: submodels it
    cannot be combined with; `step`: the assembly step of `kit.assemble` that adds it (one of
    `kit.STEPS`); `scale`: how the `data` preset centres its parameters on a recording
    (`scales.Scales.nominals`); `description`: for reports, the docs and help texts.
    """

    kind: Submodel
    code: int
    description: str
    parameters: tuple[ParameterSpec, ...]
    step: str
    scale: str
    masses: int = 0
    excludes: frozenset[Submodel] = frozenset()
    why_excludes: str = ""  # the reason, said when a structure breaks the rule


_LADDER_SCALE = ("inertias: shares of the rigid-body total J; springs and dampers from the "
                 "recording's resonance")  # fmt: skip
KIT: tuple[SubmodelRow, ...] = (
    SubmodelRow(Submodel.ONE_MASS, 1, "one rigid inertia", _ladder(1), "ladder", "J1 = J",
                masses=1, excludes=frozenset({Submodel.BACKLASH}),
                why_excludes="backlash needs inertias 1 and 2"),
    SubmodelRow(Submodel.TWO_MASS, 2, "two inertias, one shaft", _ladder(2), "ladder",
                _LADDER_SCALE, masses=2),
    SubmodelRow(Submodel.THREE_MASS, 3, "three inertias, two shafts", _ladder(3), "ladder",
                _LADDER_SCALE, masses=3),
    SubmodelRow(Submodel.FOUR_MASS, 4, "four inertias, three shafts", _ladder(4), "ladder",
                _LADDER_SCALE, masses=4),
    SubmodelRow(Submodel.COULOMB, 5, "Coulomb friction at inertia 1",
                (_p("M_C", "N m", 0.2, "Coulomb friction torque"),), "friction",
                "M_C from the rigid-body fit"),
    SubmodelRow(Submodel.VISCOUS, 6, "viscous friction at inertia 1",
                (_p("f_v", "N m s/rad", 0.01, "viscous friction coefficient"),), "friction",
                "f_v from the rigid-body fit"),
    SubmodelRow(Submodel.STRIBECK, 7, "Stribeck friction at inertia 1", (
        _p("M_S", "N m", 0.15, "Stribeck torque (breakaway minus Coulomb)"),
        _p("dq0", "rad/s", 1.0, "Stribeck velocity"),
    ), "friction", "M_S = M_C / 2, dq0 = 0.1 v_max"),
    SubmodelRow(Submodel.GRAVITY, 8, "constant (gravity/offset) torque at inertia 1", (
        ParameterSpec("M_G", "N m", 0.0, -0.5, 0.5, "constant (gravity/offset) torque"),
    ), "gravity", "M_G = -offset of the rigid-body fit"),
    SubmodelRow(Submodel.BACKLASH, 9, "backlash between inertias 1 and 2",
                (_p("alpha", "rad", 0.005, "half backlash gap (gap = 2 alpha)"),), "backlash",
                "alpha = 1e-3 of the position range", excludes=frozenset({Submodel.ONE_MASS}),
                why_excludes="backlash needs inertias 1 and 2"),
    SubmodelRow(Submodel.CURRENT_CONTROL, 10, "current control, first-order lag at the input",
                (_p("T_1", "s", 0.002, "current-loop PT1 time constant"),), "current_control",
                "T_1 = 2 samples"),
    SubmodelRow(Submodel.DELAY, 11, "input dead time (linear interpolation)",
                (_p("T_d", "s", 0.005, "input dead time"),), "delay", "T_d = 5 samples"),
)  # fmt: skip
ROWS: dict[Submodel, SubmodelRow] = {row.kind: row for row in KIT}
_CODES = {row.kind: row.code for row in KIT}
_MASSES = {row.kind: row.masses for row in KIT if row.masses}
MULTI_MASS = frozenset(_MASSES)
PARAMETERS: dict[Submodel, tuple[ParameterSpec, ...]] = {row.kind: row.parameters for row in KIT}

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
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise InputError(f"bounds of {spec.name} must be finite, got [{lo:g}, {hi:g}]")
            if spec.lower > 0.0 and not lo > 0.0:
                raise InputError(f"bounds of {spec.name} ({spec.description}, > 0 on every "
                                 f"machine): the lower bound must be > 0, got {lo:g}")  # fmt: skip
            if not (lo < hi) or not (lo <= spec.nominal <= hi):
                if not lo < hi:
                    raise InputError(f"bounds of {spec.name} must satisfy lower < upper")
                spec = replace(spec, nominal=min(max(spec.nominal, lo), hi))
            spec = replace(spec, lower=lo, upper=hi)
        specs.append(spec)
    return tuple(specs)


def positive_parameters(structure: Iterable[Submodel | str | int] | str) -> set[str]:
    """Names of the structure's parameters that are > 0 on every machine (the kit's own boxes,
    whatever box a user gives): all but a torque of either sign (``M_G``)."""
    return {s.name for k in canonical(structure) for s in parameter_specs(k) if s.lower > 0}


def canonical(structure: Iterable[Submodel | str | int] | str) -> tuple[Submodel, ...]:
    """Parse and sort a structure by paper code (duplicates are kept, for rule checks); a
    string is split at ``,``, ``;`` or ``+`` (``"two_mass+backlash"``, as results print it)."""
    if isinstance(structure, str):
        structure = [s for s in re.split(r"[,;+]", structure) if s.strip()]
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
    for kind in sorted(seen, key=lambda k: k.code):
        for other in sorted(ROWS[kind].excludes & seen, key=lambda k: k.code):
            if kind.code < other.code:  # each pair once
                why = ROWS[kind].why_excludes or ROWS[other].why_excludes
                problems.append(f"{kind.value} excludes {other.value} ({why})")
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
    return not (ROWS[kind].excludes & kinds)


def parse_structure(structure: Iterable[Submodel | str | int] | str) -> tuple[Submodel, ...]:
    """Parse ``"two_mass,coulomb"`` / ``[2, 5]`` / names into a valid canonical structure."""
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

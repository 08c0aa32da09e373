"""A lab's own underactuated system from its energies (docs/models.md, "Your own underactuated
system"): the protocol, its checks, and the `System` greylab builds from it.

The object (an instance, or a class instantiated with no arguments by `plugins.resolve_system`)
has ``name``, ``description``, ``parameters`` (name -> default), optional ``units``,
``coordinates``, ``controls``, ``outputs`` (tuples of names), ``kinetic_energy(q, v, p)``,
``potential_energy(q, p)``, ``input_forces(q, u, p)`` (n generalised forces, linear in u),
``output(q, p)`` (m demanded outputs) and optionally ``dissipation(q, v, p)`` (n generalised
non-conservative forces), ``default_demand``, ``nominal`` (coordinate -> start guess),
``bounds`` (coordinate -> (lo, hi)), ``demand_order`` (default 4) and
``exact_solution(t, y, p)``. The functions are called once, on CasADi symbols (``q[i]``,
``v[i]``, ``u[i]``, ``p["name"]``); greylab derives ``M = d2T/dv2``, the Coriolis/centrifugal
and potential forces (Lagrange), the input matrix ``G = d(input_forces)/du`` and sets up the
servo-constraint problem, with the same compiled path as the built-in systems.

Every problem is an `InputError` naming the attribute in the user's words.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import casadi as ca
import numpy as np
import pandas as pd

from methods.dae import Demand, InverseProblemError, RankPolicy, ServoProblem
from methods.errors import InputError, first_line
from models.underactuated.base import Parameter, System, SystemSpec, lagrange_terms

__all__ = ["REQUIRED", "build_user_system", "is_user_system", "user_spec"]

REQUIRED = (
    "name", "description", "parameters", "coordinates", "controls", "outputs",
    "kinetic_energy", "potential_energy", "input_forces", "output",
)  # fmt: skip
FUNCTIONS = ("kinetic_energy", "potential_energy", "input_forces", "output")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SINGULAR_RTOL = 1e-12  # eigenvalues of M below this fraction of the largest count as zero


def is_user_system(obj: object) -> bool:
    """True when ``obj`` (class or instance) has the protocol's four functions."""
    return all(callable(getattr(obj, f, None)) for f in FUNCTIONS)


def _names(obj: Any, ref: str, attr: str) -> tuple[str, ...]:
    value = getattr(obj, attr)
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise InputError(f"{ref}.{attr}: expected a non-empty tuple of names, got {value!r:.120}")
    for item in value:
        if not isinstance(item, str) or not _NAME.match(item):
            raise InputError(
                f"{ref}.{attr}: {item!r:.80} is not a name (letters, digits, _; at most 64, "
                "not starting with a digit)"
            )
    if len(set(value)) != len(value):
        raise InputError(f"{ref}.{attr}: names must be unique, got {list(value)}")
    return tuple(value)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(f"{where}: expected a number (its default value), got {value!r:.80}")
    if not math.isfinite(float(value)):
        raise InputError(f"{where}: must be finite, got {value!r}")
    return float(value)


def _parameters(obj: Any, ref: str) -> tuple[Parameter, ...]:
    params = obj.parameters
    if not isinstance(params, Mapping):
        raise InputError(
            f"{ref}.parameters: expected a mapping name -> default value, got "
            f"{type(params).__name__} (every parameter needs a default)"
        )
    units = getattr(obj, "units", None) or {}
    if not isinstance(units, Mapping):
        raise InputError(f"{ref}.units: expected a mapping name -> unit, got {units!r:.80}")
    unknown = sorted(set(units) - set(params))
    if unknown:
        raise InputError(f"{ref}.units: {unknown} are not parameters ({sorted(params)})")
    out = []
    for key, value in params.items():
        if not isinstance(key, str) or not _NAME.match(key):
            raise InputError(f"{ref}.parameters: {key!r:.80} is not a name")
        if value is None:
            raise InputError(f"{ref}.parameters[{key!r}]: has no default value")
        out.append(Parameter(key, _number(value, f"{ref}.parameters[{key!r}]"),
                             str(units.get(key, "")), "", positive=False))  # fmt: skip
    return tuple(out)


def _coordinate_map(obj: Any, ref: str, attr: str, coords: tuple[str, ...]) -> dict[str, Any]:
    value = getattr(obj, attr, None) or {}
    if not isinstance(value, Mapping):
        raise InputError(f"{ref}.{attr}: expected a mapping coordinate -> value")
    unknown = sorted(set(value) - set(coords))
    if unknown:
        raise InputError(f"{ref}.{attr}: {unknown} are not coordinates {list(coords)}")
    return dict(value)


def user_spec(obj: Any, reference: str) -> SystemSpec:
    """Check the protocol's attributes (without calling the functions); the registry entry."""
    missing = [a for a in REQUIRED if not hasattr(obj, a)]
    if missing:
        raise InputError(
            f"system {reference}: missing attribute(s) {missing}; a system needs {list(REQUIRED)}"
            " (docs/models.md)"
        )
    for attr in (*FUNCTIONS, "dissipation", "exact_solution"):
        if hasattr(obj, attr) and not callable(getattr(obj, attr)):
            raise InputError(f"{reference}.{attr}: must be a function (method)")
    for attr in ("name", "description"):
        if not isinstance(getattr(obj, attr), str):
            raise InputError(f"{reference}.{attr}: expected a string")
    params = _parameters(obj, reference)
    coords = _names(obj, reference, "coordinates")
    controls = _names(obj, reference, "controls")
    outputs = _names(obj, reference, "outputs")
    if len(outputs) != len(controls):
        raise InputError(
            f"{reference}.outputs: one demanded output per control: {len(outputs)} outputs "
            f"{list(outputs)} for {len(controls)} controls {list(controls)}"
        )
    if not len(controls) < len(coords):
        raise InputError(
            f"{reference}.controls: an underactuated system has fewer controls than coordinates"
            f" ({len(controls)} controls {list(controls)}, {len(coords)} coordinates)"
        )
    velocities = tuple(f"v_{c}" for c in coords)
    clash = sorted((set(velocities) | {"t_s"} | set(coords)) & set(controls))
    if clash or "t_s" in coords:
        raise InputError(
            f"{reference}.controls: {clash or ['t_s']} is also a coordinate, velocity (v_<name>)"
            " or the time column t_s; the table needs distinct column names"
        )
    order = getattr(obj, "demand_order", 4)
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= 20:
        raise InputError(f"{reference}.demand_order: expected an integer 1..20, got {order!r:.40}")
    _coordinate_map(obj, reference, "nominal", coords)
    _coordinate_map(obj, reference, "bounds", coords)

    def build(name: str, description: str, ps: tuple[Parameter, ...], p: dict) -> System:
        return build_user_system(obj, name, ps, p)

    return SystemSpec(reference, obj.description, params, build)


def _as_column(value: Any, where: str, length: int | None) -> ca.SX:
    """A user's return value (scalar, list, numpy array, CasADi) as an SX column."""
    try:
        if isinstance(value, ca.SX | ca.DM):
            col = ca.SX(value)
        elif isinstance(value, list | tuple | np.ndarray):
            items = list(np.asarray(value, dtype=object).ravel())
            col = ca.vertcat(*[ca.SX(x) for x in items]) if items else ca.SX(0, 1)
        else:
            col = ca.SX(value)
    except Exception as exc:
        raise InputError(
            f"{where}: returned {type(value).__name__}, not a CasADi expression or numbers "
            f"({first_line(exc)})"
        ) from None
    if col.numel() and min(col.shape) == 1:
        col = ca.vec(col)
    want = 1 if length is None else length
    if col.shape != (want, 1):
        what = "a scalar" if length is None else f"{length} values (one per {_per(where)})"
        raise InputError(f"{where}: must return {what}, got shape {col.shape}")
    return col


def _per(where: str) -> str:
    return "output" if where.endswith("output(q, p)") else "coordinate"


def _call(obj: Any, ref: str, attr: str, sig: str, args: tuple, length: int | None) -> ca.SX:
    where = f"{ref}.{attr}{sig}"
    try:
        with warnings.catch_warnings():  # numpy functions on symbols work; CasADi says so
            warnings.simplefilter("ignore", FutureWarning)
            value = getattr(obj, attr)(*args)
    except Exception as exc:  # the user's code failed on symbols (math.sin, an if on a value)
        raise InputError(
            f"{where} cannot be evaluated on CasADi symbols: {first_line(exc)}. Write it with "
            "arithmetic and casadi functions (casadi.sin, cos, sqrt, fmax, if_else), not math "
            "functions or a Python if on a value (docs/models.md)"
        ) from None
    return _as_column(value, where, length)


def _depends(expr: ca.SX, sym: ca.SX) -> bool:
    return bool(ca.depends_on(expr, sym)) if sym.numel() else False


def build_user_system(obj: Any, ref: str, params: tuple[Parameter, ...], p: dict) -> System:
    """The servo problem of a user's system with parameter values ``p`` (see the module doc)."""
    coords = tuple(obj.coordinates)
    controls, outputs = tuple(obj.controls), tuple(obj.outputs)
    nominal = _coordinate_map(obj, ref, "nominal", coords)
    bounds = _coordinate_map(obj, ref, "bounds", coords)
    pb = ServoProblem(ref)
    pb.steady_closure = True  # a dissipative force alone must not set the start in motion
    q = pb.coordinates(
        coords,
        nominal=[_number(nominal.get(c, 0.0), f"{ref}.nominal[{c!r}]") for c in coords],
        bounds={c: _bound(b, f"{ref}.bounds[{c!r}]") for c, b in bounds.items()},
    )
    v, u = pb.velocities, pb.controls(controls)
    psym = {k: ca.SX.sym(k) for k in p}
    n, m = len(coords), len(controls)
    T = _call(obj, ref, "kinetic_energy", "(q, v, p)", (q, v, psym), None)
    V = _call(obj, ref, "potential_energy", "(q, p)", (q, psym), None)
    forces = _call(obj, ref, "input_forces", "(q, u, p)", (q, u, psym), n)
    Phi = _call(obj, ref, "output", "(q, p)", (q, psym), m)
    diss = ca.SX.zeros(n, 1)
    if callable(getattr(obj, "dissipation", None)):
        diss = _call(obj, ref, "dissipation", "(q, v, p)", (q, v, psym), n)
    psx = ca.vertcat(*psym.values()) if psym else ca.SX(0, 1)
    pval = ca.DM([p[k] for k in psym]) if psym else ca.DM(0, 1)
    T, V, forces, Phi, diss = (
        ca.substitute(e, psx, pval) if psym else e for e in (T, V, forces, Phi, diss)
    )
    _check_symbols(ref, {"kinetic_energy": (T, "u"), "potential_energy": (V, "vu"),
                         "input_forces": (forces, "v"), "output": (Phi, "vu"),
                         "dissipation": (diss, "u")}, {"q": q, "v": v, "u": u})  # fmt: skip
    _check_finite(ref, {"kinetic_energy": T, "potential_energy": V, "input_forces": forces,
                        "output": Phi, "dissipation": diss}, (q, v, u), pb.q_nominal)  # fmt: skip
    M, d, f = lagrange_terms(q, v, T, V)
    if _depends(M, v):
        raise InputError(
            f"{ref}.kinetic_energy: must be quadratic in the velocities (T = 1/2 v^T M(q) v); "
            "its second derivative in v still depends on v"
        )
    G = ca.jacobian(forces, u)
    _check_linear_inputs(ref, forces, G, q, u, pb.q_nominal)
    _check_mass_matrix(ref, coords, M, q, pb.q_nominal)
    pb.set_dynamics(M=M, d=d, f=f + diss, G=G)
    pb.set_outputs(Phi, outputs, demand_order=int(getattr(obj, "demand_order", 4)))
    try:
        pb.setup(rank_policy=RankPolicy.STRICT)
    except InverseProblemError as exc:
        raise InverseProblemError(_rank_message(ref, pb, nominal, str(exc))) from None
    default = getattr(obj, "default_demand", None)
    exact = _exact(obj, ref, pb, p) if callable(getattr(obj, "exact_solution", None)) else None
    return System(
        ref, str(obj.description), params, pb, default, exact,  # type: ignore[arg-type]
        reference=ref, user_name=str(obj.name), strict_rank=True,
    )  # fmt: skip


def _bound(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise InputError(f"{where}: expected (lower, upper), got {value!r:.80}")
    lo, hi = (float(x) if x is not None else math.inf * s for x, s in zip(value, (-1, 1)))
    if not lo < hi:
        raise InputError(f"{where}: lower {lo:g} must be below upper {hi:g}")
    return lo, hi


def _check_symbols(ref: str, exprs: dict[str, tuple[ca.SX, str]], syms: dict[str, ca.SX]) -> None:
    """Each function uses only q, v, u (parameters are substituted) and not the ones it may
    not depend on (``forbidden``: letters of ``syms``)."""
    known = {str(s) for sym in syms.values() for s in ca.symvar(sym)}
    words = {"q": "coordinates q", "v": "velocities v", "u": "controls u"}
    for attr, (expr, forbidden) in exprs.items():
        extra = sorted({str(s) for s in ca.symvar(expr)} - known)
        if extra:
            raise InputError(
                f"{ref}.{attr}: uses symbols {extra[:5]} that are not q, v, u or p[...] (make "
                "every quantity a parameter or a coordinate)"
            )
        for letter in forbidden:
            if _depends(expr, syms[letter]):
                raise InputError(f"{ref}.{attr}: must not depend on the {words[letter]}")


def _check_finite(ref: str, exprs: dict[str, ca.SX], syms: tuple, q0: np.ndarray) -> None:
    """Every function is finite at the nominal state (math.sin(symbol) silently gives nan)."""
    state = [q0, np.zeros(syms[1].numel()), np.zeros(syms[2].numel())]
    for attr, expr in exprs.items():
        value = np.asarray(ca.Function("x", list(syms), [expr])(*state), float)
        if not np.isfinite(value).all():
            where = ", ".join(f"q[{i}] = {x:g}" for i, x in enumerate(q0))
            raise InputError(
                f"{ref}.{attr} cannot be evaluated on CasADi symbols: it is not finite at the "
                f"nominal state ({where}, v = 0, u = 0). A math or float function applied to a "
                "symbol gives nan: use casadi functions (casadi.sin, cos, sqrt) (docs/models.md)"
            )


def _check_linear_inputs(ref: str, forces: ca.SX, G: ca.SX, q: ca.SX, u: ca.SX, q0) -> None:
    if _depends(G, u):
        raise InputError(
            f"{ref}.input_forces: must be linear in the controls (generalised forces G(q) u)"
        )
    at_zero = ca.Function("f0", [q], [ca.substitute(forces, u, ca.DM.zeros(u.shape))])
    rng = np.random.default_rng(0)
    for qq in (q0, q0 + rng.standard_normal(q0.size)):
        if np.max(np.abs(np.asarray(at_zero(qq))), initial=0.0) > 1e-12:
            raise InputError(
                f"{ref}.input_forces: must vanish for zero controls (G(q) u); forces that act "
                "without the controls belong in potential_energy or dissipation"
            )


def _check_mass_matrix(ref: str, coords: tuple[str, ...], M: ca.SX, q: ca.SX, q0) -> None:
    Mn = np.asarray(ca.Function("M", [q], [M])(q0), float)
    where = ", ".join(f"{c} = {x:g}" for c, x in zip(coords, q0))
    if not np.isfinite(Mn).all():
        raise InputError(f"{ref}.kinetic_energy: the mass matrix is not finite at ({where})")
    w, vecs = np.linalg.eigh(0.5 * (Mn + Mn.T))
    if w[0] <= _SINGULAR_RTOL * max(abs(w[-1]), 1e-300):
        null = vecs[:, 0]
        names = [c for c, x in zip(coords, null) if abs(x) > 0.1 * np.max(np.abs(null))]
        raise InputError(
            f"{ref}.kinetic_energy: the mass matrix d2T/dv2 is singular (or not positive) at the "
            f"nominal coordinates ({where}): no inertia along {names}; every coordinate needs "
            "kinetic energy (or set `nominal` away from a singular configuration)"
        )


def _rank_message(ref: str, pb: ServoProblem, nominal: dict, core: str) -> str:
    info = pb.rank_info
    rank = f"rank([C;B]) = {info.rank_CB} < n = {info.n}" if info else core
    where = ", ".join(f"{c} = {x:g}" for c, x in zip(pb.coordinate_names, pb.q_nominal))
    return (
        f"{ref}: the outputs {list(pb.output_names)} and the controls {list(pb.control_names)} "
        f"do not span the coordinates {list(pb.coordinate_names)} ({rank} at the nominal "
        f"coordinates {where}): the demanded outputs are not reachable by the controls this way; "
        "choose other outputs or controls (or `nominal` away from a singular configuration)"
    )


def _exact(obj: Any, ref: str, pb: ServoProblem, p: dict) -> Callable:
    columns = set(pb.coordinate_names) | set(pb.velocity_names) | set(pb.control_names)

    def exact(demand: Demand, t: np.ndarray) -> pd.DataFrame:
        g = demand.evaluate(pb.output_names, t, pb.demand_order)
        y = {name: g[:, i, :] for i, name in enumerate(pb.output_names)}
        try:
            cols = obj.exact_solution(t, y, dict(p))
        except Exception as exc:
            raise InputError(f"{ref}.exact_solution(t, y, p) failed: {first_line(exc)}") from None
        if not isinstance(cols, Mapping):
            raise InputError(f"{ref}.exact_solution: expected a mapping column -> values")
        unknown = sorted(set(cols) - columns)
        if unknown:
            raise InputError(f"{ref}.exact_solution: {unknown} are not columns {sorted(columns)}")
        out = {"t_s": t}
        for key, val in cols.items():
            try:
                out[key] = np.broadcast_to(np.asarray(val, float), t.shape)
            except (TypeError, ValueError) as exc:
                raise InputError(
                    f"{ref}.exact_solution: column {key!r} is not {t.size} numbers, one per "
                    f"time ({first_line(exc)})"
                ) from None
        return pd.DataFrame(out)

    return exact

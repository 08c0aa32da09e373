"""An identified drive-train model as a product: load it, simulate it, check it on a recording.

``DriveModel`` holds everything needed to re-simulate an identified structure without the
search: the structure (canonical submodel names), every parameter of the assembled model, the
kit options the search used (``f_tanh``, ``nominals``, ``bounds``: they fix the parameter box
and hence the simulator's RK4 substep count, see :mod:`models.drivetrain.simulate`), the sample
time ``dt`` of the identification recording and the units. ``to_dict``/``from_dict`` give plain
JSON; ``from_dict`` (and the constructor) reject unusable content with an ``InputError``
naming the field.

Simulation conventions are those of the search (``models.drivetrain.gp.evaluate``): open loop
from the torque samples on the ``dt`` grid, every inertia starting with the initial velocity,
position = cumulative trapezoid of the simulated velocity plus the initial position.

``validate(model, frame)`` checks a recording against the model (:func:`check_recording`:
the contract of ``schemas.drive``, the model's sample time), simulates it open loop from the
recording's torque and first sample, and compares velocity (and position, when recorded) with
``methods.validation.output_metrics``.

Cost: a fresh process spends ~1 s importing numpy/CasADi; building the simulator and one
simulation then take tens of ms for small structures (measured in ``data/emps/README.md``).
``simulate(jit=True)`` (default) uses the native code of the step from the disk cache
(``models.drivetrain.jit``), compiling it once per machine and structure if missing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from methods.errors import InputError
from models import budget
from models.drivetrain.simulate import CompiledSimulator, get_simulator
from models.drivetrain.submodels import DEFAULT_F_TANH, parameter_specs, parse_structure

if TYPE_CHECKING:
    import pandas as pd

    from models.drivetrain.gp.settings import GPSettings

#: quantities of the recording columns per kind of drive: (input, velocity, position) units
UNITS = {"rotary": ("N m", "rad/s", "rad"), "prismatic": ("N", "m/s", "m")}
#: sample-time tolerance (relative), the uniformity tolerance of ``schemas.drive``
DT_RTOL = 1e-3


def _finite(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"drive model: {where} must be a number, got {value!r:.60}") from None
    if not math.isfinite(number):
        raise InputError(f"drive model: {where} must be finite, got {number!r}")
    return number


def _number_map(values: Any, where: str) -> dict[str, float]:
    if not isinstance(values, Mapping):
        raise InputError(f"drive model: '{where}' must be a mapping name -> number")
    return {str(k): _finite(v, f"{where}[{k!r}]") for k, v in values.items()}


def _bounds_map(values: Any) -> dict[str, tuple[float, float]]:
    if not isinstance(values, Mapping):
        raise InputError("drive model: 'bounds' must be a mapping name -> [lower, upper]")
    out = {}
    for name, pair in values.items():
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise InputError(f"drive model: bounds[{name!r}] must be [lower, upper]")
        lo, hi = (_finite(v, f"bounds[{name!r}]") for v in pair)
        if not lo < hi:
            raise InputError(f"drive model: bounds[{name!r}] needs lower < upper, got {lo}, {hi}")
        out[str(name)] = (lo, hi)
    return out


@dataclass(frozen=True)
class DriveModel:
    """An identified drive-train structure with its parameters (see module docstring).

    ``structure``: submodel names in canonical order; ``parameters``: every parameter of the
    assembled model (name -> value, inside its bounds); ``dt``: sample time of the
    identification recording [s]; ``f_tanh``, ``nominals``, ``bounds``: as the search passed them to the kit;
    ``min_substeps``: the RK4 substeps per sample the parameters were identified with (the
    simulator takes the step-size rule's count at the parameters if that is larger); ``units``: ``"rotary"`` (N m, rad/s, rad) or
    ``"prismatic"`` (N, m/s, m: EMPS); ``position_weight``: the identification's weight of the
    position error (information only); ``source``: free text (what it was identified on).
    """

    structure: tuple[str, ...]
    parameters: dict[str, float] = field(hash=False)
    dt: float
    f_tanh: float = DEFAULT_F_TANH
    nominals: dict[str, float] = field(default_factory=dict, hash=False)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict, hash=False)
    min_substeps: int = 1
    units: str = "rotary"
    position_weight: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.structure, str) or not hasattr(self.structure, "__iter__"):
            raise InputError("drive model: 'structure' must be a list of submodel names")
        try:
            kinds = parse_structure(list(self.structure))
        except InputError as exc:
            raise InputError(f"drive model: 'structure': {exc}") from None
        dt, f_tanh = _finite(self.dt, "'dt'"), _finite(self.f_tanh, "'f_tanh'")
        if not (dt > 0 and f_tanh > 0):
            raise InputError(f"drive model: 'dt' and 'f_tanh' must be > 0, got {dt}, {f_tanh}")
        if self.units not in UNITS:
            raise InputError(
                f"drive model: 'units' must be one of {list(UNITS)}, got {self.units!r}"
            )
        if not isinstance(self.min_substeps, int) or self.min_substeps < 1:
            raise InputError(
                f"drive model: 'min_substeps' must be an integer >= 1, got {self.min_substeps!r}"
            )
        budget.check_substeps(self.min_substeps, "drive model: 'min_substeps'")
        weight = _finite(self.position_weight, "'position_weight'")
        if weight < 0:
            raise InputError(f"drive model: 'position_weight' must be >= 0, got {weight}")
        set_ = object.__setattr__
        set_(self, "structure", tuple(k.value for k in kinds))
        set_(self, "dt", dt)
        set_(self, "f_tanh", f_tanh)
        set_(self, "position_weight", weight)
        set_(self, "source", str(self.source))
        set_(self, "nominals", _number_map(self.nominals, "nominals"))
        set_(self, "bounds", _bounds_map(self.bounds))
        set_(self, "parameters", self._checked_parameters())

    def _checked_parameters(self) -> dict[str, float]:
        """The parameters in the model's order; every one present, finite, inside its box."""
        values = _number_map(self.parameters, "parameters")
        try:
            specs = [s for k in self.structure
                     for s in parameter_specs(k, self.nominals, self.bounds)]  # fmt: skip
        except InputError as exc:  # a box the kit refuses (bounds of J1 opened to <= 0)
            raise InputError(f"drive model: {exc}") from None
        names = [s.name for s in specs]
        missing = [n for n in names if n not in values]
        unknown = sorted(set(values) - set(names))
        if missing or unknown:
            raise InputError(
                f"drive model: 'parameters' must hold exactly {names} of {list(self.structure)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {unknown}" if unknown else "")
            )
        for spec in specs:
            slack = 1e-9 * (spec.upper - spec.lower)  # rounding of the normalised fit
            if not spec.lower - slack <= values[spec.name] <= spec.upper + slack:
                raise InputError(
                    f"drive model: parameters[{spec.name!r}] = {values[spec.name]:g} lies outside "
                    f"its bounds [{spec.lower:g}, {spec.upper:g}] (the simulator's step size is "
                    "chosen for that box; give 'nominals' or 'bounds' that contain it)"
                )
        return {n: values[n] for n in names}

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_settings(
        cls,
        structure: Any,
        parameters: Mapping[str, float],
        settings: GPSettings,
        dt: float,
        *,
        units: str | None = None,
        source: str = "",
        n_sub: int = 1,
    ) -> DriveModel:
        """The model of an identification with ``settings`` on a recording of step ``dt``
        whose parameters were fitted with ``n_sub`` RK4 substeps per sample (``min_substeps``:
        the model simulates with at least as many, so it reproduces the fit).
        ``units=None``: ``"prismatic"`` if ``settings`` carry the EMPS preset's nominals and
        tanh gain (``models.drivetrain.gp.presets``), else ``"rotary"``."""
        if units is None:
            from models.drivetrain.gp.presets import EMPS_F_TANH, EMPS_NOMINALS

            emps = dict(settings.nominals) == EMPS_NOMINALS and settings.f_tanh == EMPS_F_TANH
            units = "prismatic" if emps else "rotary"
        return cls(
            structure=tuple(structure), parameters=dict(parameters), dt=dt,
            f_tanh=settings.f_tanh, nominals=dict(settings.nominals),
            bounds=dict(settings.bounds), units=units,
            position_weight=settings.identification.position_weight, source=source,
            min_substeps=int(n_sub),
        )  # fmt: skip

    @classmethod
    def from_search(
        cls, search: Any, *, units: str | None = None, source: str | None = None
    ) -> DriveModel:
        """The best model of a fitted ``models.drivetrain.gp.StructureSearch`` (its
        ``model_``: best structure and parameters, settings, the recording's ``dt``)."""
        model = getattr(search, "model_", None)
        if not isinstance(model, DriveModel):
            raise InputError("from_search needs a fitted StructureSearch (call fit() first)")
        return replace(
            model,
            units=model.units if units is None else units,
            source=model.source if source is None else source,
        )

    def to_dict(self) -> dict:
        """Plain JSON types (lists for tuples); ``from_dict(to_dict())`` gives the same model."""
        return {
            "structure": list(self.structure), "parameters": dict(self.parameters),
            "dt": self.dt, "f_tanh": self.f_tanh, "nominals": dict(self.nominals),
            "bounds": {k: list(v) for k, v in self.bounds.items()},
            "min_substeps": self.min_substeps, "units": self.units,
            "position_weight": self.position_weight, "source": self.source,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Any) -> DriveModel:
        """A model from :meth:`to_dict` output (e.g. read from JSON), validated: unknown or
        missing fields, an unknown submodel, missing or extra parameters, non-finite values
        raise ``InputError`` naming the field."""
        if not isinstance(data, Mapping):
            raise InputError(f"drive model: expected a mapping, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(map(str, data)) - known)
        missing = [f for f in ("structure", "parameters", "dt") if f not in data]
        if unknown or missing:
            raise InputError(
                "drive model: "
                + (f"unknown field(s) {unknown[:10]}" if unknown else "")
                + ("; " if unknown and missing else "")
                + (f"missing field(s) {missing}" if missing else "")
            )
        structure = data["structure"]
        if isinstance(structure, str) or not isinstance(structure, list | tuple):
            raise InputError("drive model: 'structure' must be a list of submodel names")
        min_substeps = data.get("min_substeps", 1)
        if isinstance(min_substeps, float) and min_substeps.is_integer():
            min_substeps = int(min_substeps)
        return cls(**{**dict(data), "structure": tuple(structure), "min_substeps": min_substeps})

    # -- simulation --------------------------------------------------------------------------
    @property
    def unit_names(self) -> tuple[str, str, str]:
        """Units of (input, velocity, position)."""
        input_unit, velocity_unit, position_unit = UNITS[self.units]
        return input_unit, velocity_unit, position_unit

    def simulator(self, n_samples: int, *, jit: bool = True) -> CompiledSimulator:
        """The compiled simulator for ``n_samples`` steps ``dt`` (per-process cache; with
        ``jit`` native code from the disk cache, compiled once per machine if missing): the
        step-size rule's substeps at the model's parameters, at least ``min_substeps`` (the
        identification's own count)."""
        return get_simulator(
            self.structure, n_samples, self.dt, f_tanh=self.f_tanh,
            nominals=self.nominals or None, bounds=self.bounds or None,
            min_substeps=self.min_substeps, at=self.parameters, jit=jit,
        )  # fmt: skip

    def simulate(
        self, torque: Any, *, velocity0: float = 0.0, position0: float = 0.0, jit: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Open-loop (velocity, position) of inertia 1, each (N,), for the torque samples (N,)
        on the model's grid ``dt``, from rest at ``velocity0`` and ``position0``."""
        u = np.asarray(torque, dtype=float)
        if u.ndim != 1 or u.size < 2:
            raise InputError(
                f"torque must be one-dimensional with >= 2 samples, got shape {u.shape}"
            )
        if not np.isfinite(u).all():
            raise InputError(
                f"torque must be finite (first bad sample {int(np.argmin(np.isfinite(u)))})"
            )
        v0 = _finite(velocity0, "velocity0")
        q0 = _finite(position0, "position0")
        sim = self.simulator(u.size, jit=jit)
        velocity = sim.simulate(sim.model.values(self.parameters), u, v0)
        position = np.zeros_like(velocity)  # cumulative trapezoid, as gp.signals.integral
        position[1:] = np.cumsum(0.5 * (velocity[1:] + velocity[:-1]) * self.dt)
        return velocity, position + q0

    def summary(self) -> str:
        params = ", ".join(f"{k}={v:.6g}" for k, v in self.parameters.items())
        return (f"drive model {list(self.structure)} ({self.units}, dt {self.dt:g} s, f_tanh "
                f"{self.f_tanh:g}): {params}" + (f"; source: {self.source}" if self.source else ""))  # fmt: skip


# -- checking a recording against a model ----------------------------------------------------
def check_recording(
    model: DriveModel, frame: Any, *, source: str = "recording", need_position: bool = False
) -> pd.DataFrame:
    """The recording ``frame`` validated for ``model``: the contract of ``schemas.drive``
    (columns, finite values, uniform time) and the model's sample time within ``DT_RTOL``
    relative; ``position_rad`` only if ``need_position``. Raises ``schemas.errors.DataError``
    (an ``InputError``) naming ``source``."""
    import pandas as pd

    from schemas.drive import validate_drive_recording
    from schemas.errors import DataError

    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"{source}: expected a drive-recording table, got {type(frame).__name__}")
    budget.check_samples(len(frame), source)  # before validating: a simulator's size
    checked = validate_drive_recording(frame, source=source)
    t = checked["t_s"].to_numpy(float)
    dt = float((t[-1] - t[0]) / (t.size - 1))
    if abs(dt - model.dt) > DT_RTOL * model.dt:
        raise DataError(
            f"{source}: sample time {dt:.6g} s does not match the model's {model.dt:.6g} s "
            f"(tolerance {DT_RTOL:g} relative); the model simulates on the grid of the recording "
            "it was identified on, so resample the recording to that step (for EMPS: load it "
            "with the same decimate) or identify a model at this sample time."
        )
    if need_position and "position_rad" not in checked:
        raise DataError(f"{source}: column 'position_rad' is needed for the position metrics")
    return checked


@dataclass(frozen=True)
class DriveValidation:
    """Open-loop validation of a :class:`DriveModel` on one recording.

    ``metrics``: ``{"velocity": {...}, "position": {...}}`` (position only when recorded) with
    ``methods.validation.output_metrics`` (rmse and max_abs in the output's unit, fit [%], r2,
    n); the arrays (time, measured and simulated outputs) are kept for figures.
    """

    structure: tuple[str, ...]
    units: str
    source: str
    dt: float
    metrics: dict[str, dict[str, float]]
    t: np.ndarray = field(repr=False)
    velocity: np.ndarray = field(repr=False)
    simulated_velocity: np.ndarray = field(repr=False)
    position: np.ndarray | None = field(default=None, repr=False)
    simulated_position: np.ndarray | None = field(default=None, repr=False)
    wall_s: float = 0.0

    def summary(self) -> str:
        _, v_unit, q_unit = UNITS[self.units]
        lines = [f"open-loop validation of {list(self.structure)} on {self.source} "
                 f"({self.t.size} samples, dt {self.dt:g} s, {self.wall_s:.2f} s)"]  # fmt: skip
        for name, unit in (("velocity", v_unit), ("position", q_unit)):
            if name in self.metrics:
                m = self.metrics[name]
                lines.append(f"  {name:8s}: RMSE {m['rmse']:.4g} {unit}, fit {m['fit']:.2f} %, "
                             f"R^2 {m['r2']:.5f}, max |error| {m['max_abs']:.4g} {unit}")  # fmt: skip
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain JSON types: what was validated and the metrics (not the arrays)."""
        return {
            "structure": list(self.structure), "units": self.units, "source": self.source,
            "dt": self.dt, "n": int(self.t.size), "wall_s": self.wall_s,
            "metrics": {k: dict(v) for k, v in self.metrics.items()},
        }  # fmt: skip

    def figure(self, title: str | None = None):
        """Measured vs simulated outputs (``models.drivetrain.plots.plot_validation``)."""
        from models.drivetrain.plots import plot_validation

        return plot_validation(
            self.t, self.velocity, self.simulated_velocity, self.position,
            self.simulated_position, title=title or f"{list(self.structure)} on {self.source}",
            units=UNITS[self.units][1:],
        )  # fmt: skip


def validate(
    model: DriveModel, frame: Any, *, source: str = "recording", jit: bool = True
) -> DriveValidation:
    """Simulate ``model`` open loop from the recording's torque, starting at its first
    velocity and position sample, and compare velocity (and position, if recorded)."""
    from methods.validation import output_metrics

    t0 = time.perf_counter()
    checked = check_recording(model, frame, source=source)
    velocity = checked["velocity_rad_s"].to_numpy(float)
    position = checked["position_rad"].to_numpy(float) if "position_rad" in checked else None
    sim_v, sim_q = model.simulate(
        checked["torque_Nm"].to_numpy(float), velocity0=float(velocity[0]),
        position0=float(position[0]) if position is not None else 0.0, jit=jit,
    )  # fmt: skip
    if not (np.isfinite(sim_v).all() and np.isfinite(sim_q).all()):
        raise InputError(f"{source}: the open-loop simulation diverged (non-finite velocity)")
    metrics = {"velocity": output_metrics(velocity, sim_v, name=f"{source} velocity")}
    if position is not None:
        metrics["position"] = output_metrics(position, sim_q, name=f"{source} position")
    return DriveValidation(
        structure=model.structure, units=model.units, source=source, dt=model.dt,
        metrics=metrics, t=checked["t_s"].to_numpy(float), velocity=velocity,
        simulated_velocity=sim_v, position=position,
        simulated_position=sim_q if position is not None else None,
        wall_s=time.perf_counter() - t0,
    )  # fmt: skip

"""Typed settings of the degenerate GP (frozen dataclasses, picklable, JSON-able)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from methods.errors import InputError
from models.drivetrain.submodels import DEFAULT_F_TANH, ParameterSpec, Submodel, parameter_specs


@dataclass(frozen=True)
class IdentificationSettings:
    """Per-individual bounded least squares (scipy ``least_squares``, TRF, exact Jacobians).

    ``n_starts``: the inherited start plus ``n_starts - 1`` uniform random starts in the box;
    ``max_nfev``: residual evaluations per start; ``time_limit_s``: wall-clock budget per
    individual (checked between evaluations; the best point so far is kept). The time limit is
    a safety net: if it triggers, results may depend on machine load (``Evaluation.timed_out``).
    ``jit``: compile simulators to C (cached on disk).
    """

    n_starts: int = 2
    max_nfev: int = 40
    time_limit_s: float = 120.0
    ftol: float = 1e-10
    xtol: float = 1e-10
    gtol: float = 1e-10
    jit: bool = True

    def __post_init__(self) -> None:
        if self.n_starts < 1 or self.max_nfev < 1 or not self.time_limit_s > 0:
            raise InputError("n_starts and max_nfev must be >= 1 and time_limit_s > 0")


@dataclass(frozen=True)
class GPSettings:
    """Every probability and size of the search.

    Paper values: population 6, generations 20, k_P = 2. ``n_elite`` (beyond the paper: the
    best individuals pass unchanged; 0 reproduces the paper) and the mutation probabilities
    (each applied independently to every new individual) are our choices.
    ``nominals``/``bounds``: per-recording parameter nominals (bounds follow as 50..200 %) and
    explicit bounds; ``f_tanh`` [s/(unit of velocity)] the fixed friction tanh gain;
    ``allowed``: the function set (restrict it to add prior knowledge).
    ``test_fraction``: identify on the head of the record, fitness RSS on the held-out tail.
    """

    population: int = 6
    generations: int = 20
    p_clone: float = 0.2
    p_point: float = 0.2
    p_insertion: float = 0.2
    p_deletion: float = 0.2
    p_chromosome: float = 0.1
    k_p: float = 2.0
    n_elite: int = 1
    max_nodes: int = 8
    test_fraction: float = 0.0
    f_tanh: float = DEFAULT_F_TANH
    nominals: tuple[tuple[str, float], ...] = ()
    bounds: tuple[tuple[str, tuple[float, float]], ...] = ()
    allowed: tuple[str, ...] = tuple(k.value for k in Submodel)
    identification: IdentificationSettings = field(default_factory=IdentificationSettings)

    def __post_init__(self) -> None:
        for name in ("p_clone", "p_point", "p_insertion", "p_deletion", "p_chromosome"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"{name} must be a probability in [0, 1], got {value!r}")
        if self.population < 2 or self.generations < 1:
            raise InputError("population must be >= 2 and generations >= 1")
        if not 0 <= self.n_elite < self.population:
            raise InputError("n_elite must be in [0, population)")
        if not 0.0 <= self.test_fraction < 0.9:
            raise InputError(f"test_fraction must be in [0, 0.9), got {self.test_fraction!r}")
        if self.max_nodes < 1 or self.k_p < 0:
            raise InputError("max_nodes must be >= 1 and k_p >= 0")
        kinds = [Submodel.parse(k) for k in self.allowed]
        if not any(k.n_masses for k in kinds):
            raise InputError("the allowed function set needs at least one multi-mass type")
        object.__setattr__(self, "allowed", tuple(k.value for k in kinds))
        if isinstance(self.nominals, Mapping):
            object.__setattr__(self, "nominals", tuple(sorted(self.nominals.items())))
        if isinstance(self.bounds, Mapping):
            items = sorted((k, tuple(v)) for k, v in self.bounds.items())
            object.__setattr__(self, "bounds", tuple(items))

    def specs(self, kind: Submodel | str) -> tuple[ParameterSpec, ...]:
        return parameter_specs(kind, dict(self.nominals), dict(self.bounds))

    def kit_options(self) -> dict:
        return {"f_tanh": self.f_tanh, "nominals": dict(self.nominals) or None,
                "bounds": dict(self.bounds) or None}  # fmt: skip

    def to_dict(self) -> dict:
        out = asdict(self)
        out["nominals"] = dict(self.nominals)
        out["bounds"] = {k: list(v) for k, v in self.bounds}
        out["allowed"] = list(self.allowed)
        return out

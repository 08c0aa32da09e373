"""Per-individual parameter identification and fitness; the picklable batch evaluator.

Identification: bounded least squares (scipy ``least_squares``, TRF) in box-normalised
coordinates ``z = (p - lower) / (upper - lower) in [0, 1]`` with the exact Jacobian of the
simulated output (forward sensitivities through the RK4 scheme), from the inherited start and
``n_starts - 1`` random starts (multi-start against local minima, e.g. the flat backlash gap).

Fitness (paper eq. 19): ``1 / (RSS (1 + k_P d))``, ``d`` = number of estimated parameters,
``RSS = sum (y_sim - y)^2`` over the fitness part of the record (all of it, or the held-out
tail with ``test_fraction > 0``). RSS is floored at ``1e-14 * sum (y - mean y)^2`` so that a
perfect (noise-free) fit keeps a finite fitness.

``evaluate_batch`` is a pure top-level function of plain data (no closures, no CasADi
objects): workers compile simulators themselves and cache them per process.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import least_squares

from methods.gp.settings import GPSettings
from models.drivetrain.simulate import get_simulator
from models.drivetrain.submodels import canonical


@dataclass(frozen=True)
class RecordingArrays:
    """Plain arrays of a recording: torque ``u`` [N m] (N,), velocity ``y`` (N,), step ``dt``."""

    u: np.ndarray
    y: np.ndarray
    dt: float

    @property
    def n(self) -> int:
        return int(self.u.size)


@dataclass(frozen=True)
class IndividualSpec:
    """What a worker needs: the structure (names) and the start values of its parameters."""

    structure: tuple[str, ...]
    start: tuple[tuple[str, float], ...]

    def key(self) -> str:
        return json.dumps([list(self.structure), [[k, repr(v)] for k, v in self.start]])


@dataclass(frozen=True)
class Evaluation:
    """Result of identifying one individual.

    Fields: structure (names), codes, parameters (name -> identified value), rss (fitness
    part), rss_train, fitness, n_params, nfev (simulations incl. Jacobians), wall_s,
    timed_out, message.
    """

    structure: tuple[str, ...]
    codes: tuple[int, ...]
    parameters: dict
    rss: float
    rss_train: float
    fitness: float
    n_params: int
    nfev: int
    wall_s: float
    timed_out: bool
    message: str = ""

    def to_dict(self) -> dict:
        out = asdict(self)
        out["structure"], out["codes"] = list(self.structure), list(self.codes)
        return out

    def summary(self) -> str:
        return (f"{list(self.codes)} {list(self.structure)}: fitness {self.fitness:.4g}, "
                f"RSS {self.rss:.4g}, d={self.n_params}, {self.nfev} sims, {self.wall_s:.2f} s")  # fmt: skip


class _Budget(Exception):
    pass


def spec_seed(spec: IndividualSpec, seed: int) -> int:
    """Seed of the random restarts: a hash of the spec and the search seed, so a result does
    not depend on the order or place (process) of evaluation."""
    digest = hashlib.sha256(f"{seed}|{spec.key()}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def split_index(n: int, test_fraction: float) -> int:
    """Number of head samples used for identification."""
    return n if test_fraction <= 0 else max(2, round(n * (1.0 - test_fraction)))


def identify(
    spec: IndividualSpec, data: RecordingArrays, settings: GPSettings, seed: int = 0
) -> Evaluation:
    """Identify the parameters of one individual and compute its fitness."""
    t0 = time.perf_counter()
    ident = settings.identification
    kit = settings.kit_options()
    n_fit = split_index(data.n, settings.test_fraction)
    sim = get_simulator(spec.structure, n_fit, data.dt, jit=ident.jit, **kit)
    specs = sim.model.specs
    lower = np.array([s.lower for s in specs])
    width = np.array([s.upper - s.lower for s in specs])
    start = sim.model.values({k: v for k, v in spec.start if k in sim.model.param_names})
    u, y, y0 = data.u[:n_fit], data.y[:n_fit], float(data.y[0])
    scale = float(np.sqrt(np.sum((y - y.mean()) ** 2)) + 1e-300)
    counter = {"n": 0}
    best = {"cost": np.inf, "z": np.clip((start - lower) / width, 0, 1)}

    def check(z: np.ndarray, r: np.ndarray) -> None:
        counter["n"] += 1
        cost = float(r @ r)
        if cost < best["cost"]:
            best["cost"], best["z"] = cost, z.copy()
        if time.perf_counter() - t0 > ident.time_limit_s:
            raise _Budget

    def fun(z: np.ndarray) -> np.ndarray:
        r = (sim.simulate(lower + width * z, u, y0) - y) / scale
        r = np.where(np.isfinite(r), r, 1e3)
        check(z, r)
        return r

    def jac(z: np.ndarray) -> np.ndarray:
        _ysim, jp = sim.simulate_with_jacobian(lower + width * z, u, y0)
        counter["n"] += 1
        jz = jp * width / scale
        return np.where(np.isfinite(jz), jz, 0.0)

    rng = np.random.default_rng(spec_seed(spec, seed))
    starts = [best["z"]] + [rng.uniform(0, 1, len(specs)) for _ in range(ident.n_starts - 1)]
    timed_out, message = False, ""
    for z0 in starts:
        try:
            res = least_squares(fun, z0, jac=jac, bounds=(0.0, 1.0), method="trf",
                                max_nfev=ident.max_nfev, ftol=ident.ftol, xtol=ident.xtol,
                                gtol=ident.gtol, x_scale=1.0)  # fmt: skip
            message = res.message
        except _Budget:
            timed_out, message = True, f"time limit {ident.time_limit_s} s reached"
            break
    p_hat = lower + width * best["z"]
    rss_train = float(best["cost"]) * scale**2
    if n_fit < data.n:  # fitness on the held-out tail, simulated through from the start
        full = get_simulator(spec.structure, data.n, data.dt, jit=ident.jit, **kit)
        resid = full.simulate(p_hat, data.u, y0)[n_fit:] - data.y[n_fit:]
        rss = float(resid @ resid) if np.all(np.isfinite(resid)) else np.inf
        y_fit = data.y[n_fit:]
    else:
        rss, y_fit = rss_train, y
    floor = 1e-14 * float(np.sum((y_fit - y_fit.mean()) ** 2)) + 1e-300
    d = len(specs)
    fitness = 1.0 / (max(rss, floor) * (1.0 + settings.k_p * d)) if np.isfinite(rss) else 0.0
    kinds = canonical(spec.structure)
    return Evaluation(
        structure=tuple(k.value for k in kinds),
        codes=tuple(k.code for k in kinds),
        parameters=dict(zip(sim.model.param_names, p_hat.tolist())),
        rss=rss, rss_train=rss_train, fitness=float(fitness), n_params=d,
        nfev=counter["n"], wall_s=time.perf_counter() - t0, timed_out=timed_out,
        message=str(message),
    )  # fmt: skip


def evaluate_batch(
    batch: list[IndividualSpec], data: RecordingArrays, settings: GPSettings, seed: int = 0
) -> list[Evaluation]:
    """Identify every individual of a batch (pure, picklable: use it with any map)."""
    return [identify(spec, data, settings, seed) for spec in batch]

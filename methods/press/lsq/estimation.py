"""Weighted least-squares parameter identification with second-order covariance (Bard).

``p_hat = argmin 1/2 sum_l omega_l ((h_l(p) - z_l) / sigma_l)^2`` over the chosen sensors,
steps and series; exact CasADi derivatives, LM in scaled parameters, bounds by projection.
The model is evaluated at ``force_setpoint_N`` (the same scenario for every series): pass a
table corrected with ``correct_to_setpoints`` (a warning is recorded otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from methods.press.data import PressData, resolve_sigma, to_cube
from methods.press.lsq.core import compile_model, parameter_arrays, solve_ls
from methods.press.lsq.covariance import bard_covariance
from methods.press.lsq.problem import LSProblem
from methods.press.uncertainty.ellipsoid import Ellipsoid


@dataclass(frozen=True)
class ParameterFit:
    """Result of ``fit_parameters``.

    ``parameters`` name -> value (model order, model units); ``covariance`` second-order C;
    ``covariance_first_order`` C1; ``success``/``message`` of the solver; ``cost`` =
    1/2 sum of squared weighted residuals; ``n_residuals``; ``identifiable``; ``condition``
    (scaled information); ``sigma`` (um per sensor) and ``sigma_source`` ("sheet" or
    "repeats"); ``warnings``; ``model``; ``sensors`` used; ``n_iterations``; ``stop_reason``
    the value of ``methods.press.lsq.lm.StopReason`` (``success`` is True only for "gradient",
    "step" or "precision": the shared convergence test passed).
    """

    model: str
    parameters: dict[str, float]
    covariance: np.ndarray
    covariance_first_order: np.ndarray
    success: bool
    message: str
    cost: float
    n_residuals: int
    identifiable: bool
    condition: float
    sigma: dict[str, float]
    sigma_source: str
    sensors: tuple[str, ...]
    warnings: tuple[str, ...]
    n_iterations: int = 0
    stop_reason: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.parameters)

    @property
    def values(self) -> np.ndarray:
        return np.array(list(self.parameters.values()))

    @property
    def standard_errors(self) -> dict[str, float]:
        return dict(zip(self.parameters, np.sqrt(np.diag(self.covariance)).tolist()))

    def ellipsoid(self, level: float = 0.95) -> Ellipsoid:
        return Ellipsoid.from_covariance(self.values, self.covariance, level, self.names)

    def summary(self) -> str:
        lines = [
            f"fit of {self.model} on {', '.join(self.sensors)}: {self.message}"
            f" ({self.n_residuals} residuals, cost {self.cost:.4g}, cond {self.condition:.3g})"
        ]
        se, se1 = self.standard_errors, np.sqrt(np.diag(self.covariance_first_order))
        for (name, v), s1 in zip(self.parameters.items(), se1):
            lines.append(f"  {name:>8} = {v:.6g}  +- {se[name]:.3g} (2nd order), {s1:.3g} (1st)")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        def mat(a: np.ndarray) -> list:
            return [[float(x) if np.isfinite(x) else None for x in row] for row in a]

        d = {
            "model": self.model,
            "parameters": {k: float(v) for k, v in self.parameters.items()},
            "standard_errors": {
                k: (float(v) if np.isfinite(v) else None) for k, v in self.standard_errors.items()
            },
            "covariance": mat(self.covariance),
            "covariance_first_order": mat(self.covariance_first_order),
            "success": bool(self.success),
            "message": self.message,
            "cost": float(self.cost),
            "n_residuals": int(self.n_residuals),
            "identifiable": bool(self.identifiable),
            "condition": float(self.condition) if np.isfinite(self.condition) else None,
            "sigma": {k: float(v) for k, v in self.sigma.items()},
            "sigma_source": self.sigma_source,
            "sensors": list(self.sensors),
            "warnings": list(self.warnings),
            "n_iterations": int(self.n_iterations),
            "stop_reason": self.stop_reason,
        }
        json.dumps(d)  # plain JSON types only
        return d


def model_data(
    model: Any, table: pd.DataFrame, sensors: Sequence[str] | None
) -> tuple[PressData, np.ndarray]:
    """Cube of the chosen sensors and their column indices in the model response."""
    model_sensors = list(model.sensors)
    sensors = list(model_sensors if sensors is None else sensors)
    unknown = [s for s in sensors if s not in model_sensors]
    if unknown:
        name = getattr(model, "name", type(model).__name__)
        raise InputError(f"sensor(s) {unknown} not in model {name}; it has {model_sensors}")
    if len(set(sensors)) != len(sensors):
        raise InputError(f"sensors must not repeat, got {sensors}")
    data = to_cube(table, sensors)
    return data, np.array([model_sensors.index(s) for s in sensors])


def _select(ids: np.ndarray, chosen: Sequence[int] | None, what: str) -> np.ndarray:
    if chosen is None:
        return np.ones(ids.size, dtype=bool)
    chosen = list(chosen)
    unknown = sorted(set(chosen) - set(ids.tolist()))
    if unknown:
        raise InputError(f"{what} {unknown} not in the table (it has {ids.tolist()})")
    return np.isin(ids, chosen)


def aggregate(
    z: np.ndarray, w: np.ndarray, sigma: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Aggregated targets: ``zbar`` (n_q, n_S), weights ``W = sum_i w / sigma^2`` and the
    constant ``sum_l w_l (z_l - zbar_l)^2 / sigma_l^2`` of the exact cost decomposition."""
    cnt = w.sum(axis=0)
    zbar = np.where(cnt > 0, (w * z).sum(axis=0) / np.maximum(cnt, 1), 0.0)
    const = float((w * (z - zbar) ** 2 / sigma**2).sum())
    return zbar, cnt / sigma**2, const


def full_weights(h_cols: np.ndarray, n_s_model: int, n_q: int, wt_sel: np.ndarray) -> np.ndarray:
    """Spread weights of the selected sensors (n_q, n_sel) onto all model sensors, flat."""
    W = np.zeros((n_q, n_s_model))
    W[:, h_cols] = wt_sel
    return W.ravel()


def fit_parameters(
    model: Any,
    table: pd.DataFrame,
    *,
    sensors: Sequence[str] | None = None,
    steps: Sequence[int] | None = None,
    series: Sequence[int] | None = None,
    sigma: Mapping[str, float] | pd.DataFrame | None = None,
    p0: Mapping[str, float] | None = None,
) -> ParameterFit:
    """Fit ``model`` to ``table`` (weighted least squares) with C and C1.

    ``sensors``/``steps``/``series`` select residuals (ids as in the table; default all model
    sensors, all steps, all series). ``sigma``: sensor -> std (um), or a sensor sheet
    DataFrame, or None: pooled std from repeats over all series of the table
    (``methods.press.data.sigma_from_repeats``, (n_M - 1) correction). ``p0`` overrides the
    model's start values.
    """
    data, cols = model_data(model, table, sensors)
    sig, source = resolve_sigma(sigma, data)
    names, start, scale, lo, hi = parameter_arrays(model)
    if p0 is not None:
        start = np.array([float(p0.get(n, v)) for n, v in zip(names, start)])
    if series is None and steps is None:  # every residual (the same weights, fewer arrays)
        w = np.ones(data.z.shape)
    else:
        w = (
            _select(data.series, series, "series")[:, None, None]
            & _select(data.steps, steps, "steps")[None, :, None]
            & np.ones(data.z.shape, dtype=bool)
        ).astype(float)
    n_res = int(w.sum())
    if n_res < len(names):
        raise InputError(
            f"only {n_res} usable residuals for {len(names)} parameters: select more data"
        )
    zbar_sel, wt_sel, const = aggregate(data.z, w, sig)
    n_q, n_s_model = data.z.shape[1], len(model.sensors)
    zbar = full_weights(cols, n_s_model, n_q, zbar_sel)
    wt = full_weights(cols, n_s_model, n_q, wt_sel)
    comp = compile_model(model, n_q)
    q = data.setpoints
    res = solve_ls(LSProblem(comp, q, zbar, wt, start, scale, lo, hi))
    h, J = comp.eval_hJ(res.p, q) if res.hJ is None else res.hJ  # the solver's, if it has it
    M = J.T @ (wt[:, None] * J)
    S = comp.eval_S(res.p, q, wt * (h - zbar))
    cov = bard_covariance(M, S, scale)
    warnings = list(cov.warnings)
    if not data.corrected:
        warnings.append(
            "measured forces differ from the setpoints: the model is evaluated at the setpoints;"
            " call correct_to_setpoints(table) first"
        )
    if not res.success:
        warnings.append(f"solver did not converge: {res.message}")
    return ParameterFit(
        model=str(getattr(model, "name", type(model).__name__)),
        parameters=dict(zip(names, res.p.tolist())),
        covariance=cov.C,
        covariance_first_order=cov.C1,
        success=res.success,
        message=res.message,
        cost=res.cost + 0.5 * const,
        n_residuals=n_res,
        identifiable=cov.identifiable,
        condition=cov.condition,
        sigma=dict(zip(data.sensors, sig.tolist())),
        sigma_source=source,
        sensors=data.sensors,
        warnings=tuple(warnings),
        n_iterations=res.n_iter,
        stop_reason=res.reason.value,
    )

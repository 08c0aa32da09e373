"""Predictions of a calibrated press model with their uncertainty, and checks on new data.

**Prediction.** For parameters ``p_hat`` with covariance ``C`` (e.g. ``ParameterFit``'s
second-order ``covariance``) and an ordered force scenario ``q`` (n_q,), the predicted
displacement is ``h(p_hat, q)`` (n_q, n_S) and its standard deviation from the parameter
uncertainty, by the delta method with the exact CasADi Jacobian ``J = dh/dp``, is
``std = sqrt(diag(J C J^T))``. It is the uncertainty of the model's mean response, not of a
single measurement: a new measurement ``z`` of sensor ``k`` scatters around it with
``sqrt(sigma_k^2 + std^2)`` (the prediction band).

**Validation.** ``validate_predictions`` predicts at the table's setpoint scenario and
compares every measured series with it: per sensor the metrics of
``methods.validation.output_metrics`` over all (series, step), the normalised residuals
``e = (z - h) / sqrt(sigma_k^2 + std^2)`` (mean ~0, std ~1 and about 5 % outside
``|e| > 1.959964`` for a correct model with correct uncertainties) and a long table of them.
Lab forces scatter around the setpoints while the model is evaluated at the setpoints (as in
``fit_parameters``), so a table whose ``force_N`` differs from ``force_setpoint_N`` is first
corrected with ``correct_to_setpoints`` (``correct=True``, the default, recorded as
``corrected``) or refused (``correct=False``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from methods.press.data import COLUMNS, correct_to_setpoints, resolve_sigma
from methods.press.lsq.core import compile_model
from methods.press.lsq.estimation import model_data
from methods.validation import output_metrics

#: Two-sided 95 % quantile of the standard normal distribution.
Z95 = 1.959964
#: Relative tolerance of the covariance's symmetry and positive semi-definiteness (rounding).
COV_RTOL = 1e-8


def _json(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _model_name(model: Any) -> str:
    return str(getattr(model, "name", type(model).__name__))


@dataclass(frozen=True)
class PressPrediction:
    """Result of ``predict_displacements``.

    ``forces`` (n_q,) N, the ordered scenario; ``sensors`` (n_S,); ``mean`` (n_q, n_S) um, the
    model response; ``std`` (n_q, n_S) um, its standard deviation from the parameter
    covariance (delta method); ``model`` its name.
    """

    model: str
    forces: np.ndarray
    sensors: tuple[str, ...]
    mean: np.ndarray
    std: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """Long table, one row per (step, sensor): step, force_N, sensor, displacement_um, std_um."""
        n_q, n_s = self.mean.shape
        return pd.DataFrame(
            {
                "step": np.repeat(np.arange(n_q), n_s),
                "force_N": np.repeat(self.forces, n_s),
                "sensor": np.tile(np.array(self.sensors, dtype=object), n_q),
                "displacement_um": self.mean.ravel(),
                "std_um": self.std.ravel(),
            }
        )

    def summary(self) -> str:
        lines = [f"prediction of {self.model} for {self.forces.size} steps"]
        for k, s in enumerate(self.sensors):
            lines.append(
                f"  {s:>14}: {self.mean[:, k].min():.4g} .. {self.mean[:, k].max():.4g} um,"
                f" std up to {self.std[:, k].max():.3g} um"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "model": self.model,
            "sensors": list(self.sensors),
            "forces_N": [_json(x) for x in self.forces],
            "mean_um": [[_json(x) for x in row] for row in self.mean],
            "std_um": [[_json(x) for x in row] for row in self.std],
        }
        json.dumps(d)  # plain JSON types only
        return d


def _parameter_vector(model: Any, parameters: Mapping[str, float]) -> tuple[list[str], np.ndarray]:
    """Parameter values in the model's order; the names must match the model's exactly."""
    names = [str(n) for n in model.parameters]
    given = [str(n) for n in parameters]
    missing = [n for n in names if n not in given]
    extra = [n for n in given if n not in names]
    if missing or extra:
        raise InputError(
            f"parameters: model {_model_name(model)} has {names}; "
            f"missing {missing[:10]}, unknown {extra[:10]}"
        )
    try:
        p = np.array([float(parameters[n]) for n in names])
    except (TypeError, ValueError) as exc:
        raise InputError(f"parameters: values must be numbers ({exc})") from exc
    if not np.isfinite(p).all():
        raise InputError(f"parameters: values must be finite, got {dict(zip(names, p.tolist()))}")
    return names, p


def check_covariance(covariance: Any, names: Sequence[str]) -> np.ndarray:
    """The covariance as a float (n_p, n_p) array, symmetrised; refused unless it is square of
    the right size, finite, symmetric and positive semi-definite within rounding (judged on the
    correlation scale, so the units of the parameters do not matter)."""
    n_p = len(names)
    try:
        C = np.asarray(covariance, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"covariance: not a numeric matrix ({exc})") from exc
    if C.shape != (n_p, n_p):
        raise InputError(
            f"covariance: shape {C.shape}, expected ({n_p}, {n_p}) for parameters {list(names)}"
        )
    if not np.isfinite(C).all():
        raise InputError(
            "covariance: has non-finite entries (an unidentifiable fit has no prediction band)"
        )
    d = np.sqrt(np.abs(np.diag(C)))
    d = np.where(d > 0, d, 1.0)
    R = C / np.outer(d, d)
    if np.max(np.abs(R - R.T), initial=0.0) > COV_RTOL:
        raise InputError("covariance: not symmetric")
    if np.any(np.diag(C) < 0) or np.linalg.eigvalsh(0.5 * (R + R.T)).min() < -COV_RTOL * n_p:
        raise InputError("covariance: not positive semi-definite")
    return 0.5 * (C + C.T)


def _sensor_columns(model: Any, sensors: Sequence[str] | None) -> tuple[tuple[str, ...], list[int]]:
    known = [str(s) for s in model.sensors]
    chosen = [str(s) for s in (known if sensors is None else sensors)]
    unknown = [s for s in chosen if s not in known]
    if unknown:
        raise InputError(
            f"sensors: {unknown[:10]} not in model {_model_name(model)}; it has {known}"
        )
    if not chosen or len(set(chosen)) != len(chosen):
        raise InputError(f"sensors: need at least one, without repeats; got {chosen[:10]}")
    return tuple(chosen), [known.index(s) for s in chosen]


def _forces(forces: Any) -> np.ndarray:
    try:
        q = np.asarray(forces, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"forces: not numbers ({exc})") from exc
    if q.ndim != 1 or q.size < 1:
        raise InputError(f"forces: need a 1-D scenario of at least one step, got shape {q.shape}")
    bad = np.flatnonzero(~np.isfinite(q))
    if bad.size:
        raise InputError(f"forces: step {int(bad[0])} is {q[bad[0]]}; forces must be finite")
    return q


def predict_displacements(
    model: Any,
    parameters: Mapping[str, float],
    covariance: Any,
    forces: Any,
    sensors: Sequence[str] | None = None,
) -> PressPrediction:
    """Displacements (um) of ``model`` for the ordered scenario ``forces`` (n_q,) N, and their
    delta-method standard deviation ``sqrt(diag(J C J^T))`` from ``covariance`` (n_p, n_p),
    given in the model's parameter order. ``sensors``: subset and order (default all)."""
    names, p = _parameter_vector(model, parameters)
    C = check_covariance(covariance, names)
    q = _forces(forces)
    chosen, cols = _sensor_columns(model, sensors)
    comp = compile_model(model, q.size)
    with np.errstate(all="ignore"):
        h, J = comp.eval_hJ(p, q)
        var = np.einsum("lp,pr,lr->l", J, C, J)
    if not (np.isfinite(h).all() and np.isfinite(var).all()):
        raise InputError(
            f"parameters: the response of model {_model_name(model)} or its Jacobian is not "
            f"finite at {dict(zip(names, p.tolist()))} for these forces"
        )
    n_s = comp.n_s
    mean = h.reshape(q.size, n_s)[:, cols]
    std = np.sqrt(np.clip(var, 0.0, None)).reshape(q.size, n_s)[:, cols]
    return PressPrediction(_model_name(model), q, chosen, mean, std)


@dataclass(frozen=True)
class PressValidation:
    """Result of ``validate_predictions``.

    ``model``; ``sensors`` compared; ``sigma`` um per sensor; ``metrics`` sensor ->
    ``output_metrics`` (rmse um, fit %, r2, max_abs um, n) over all (series, step);
    ``normalised_mean``/``normalised_std`` per sensor of ``e = (z - h) / sqrt(sigma^2 + std^2)``;
    ``outside_band`` per sensor and ``outside_band_all`` overall: the share of measurements with
    ``|e| > Z95`` (0.05 expected for a correct model); ``n_series``, ``n_steps``; ``corrected``
    True when the table was corrected to setpoints first; ``prediction`` at the setpoints;
    ``residuals`` one row per (series, step, sensor): series, step, force_N (setpoint),
    sensor, measured, predicted, std_um, normalised.
    """

    model: str
    sensors: tuple[str, ...]
    sigma: dict[str, float]
    metrics: dict[str, dict[str, float]]
    normalised_mean: dict[str, float]
    normalised_std: dict[str, float]
    outside_band: dict[str, float]
    outside_band_all: float
    n_series: int
    n_steps: int
    corrected: bool
    prediction: PressPrediction
    residuals: pd.DataFrame

    def summary(self) -> str:
        lines = [
            f"validation of {self.model} on {self.n_series} series x {self.n_steps} steps"
            + (" (corrected to setpoints)" if self.corrected else "")
            + f": {self.outside_band_all:.1%} outside the 95 % prediction band (5 % expected)"
        ]
        for s in self.sensors:
            m = self.metrics[s]
            lines.append(
                f"  {s:>14}: rmse {m['rmse']:.3g} um (sigma {self.sigma[s]:.3g}), R^2 {m['r2']:.5f},"
                f" e mean {self.normalised_mean[s]:+.2f} std {self.normalised_std[s]:.2f},"
                f" outside {self.outside_band[s]:.1%}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        def per_sensor(values: Mapping[str, float]) -> dict[str, float | None]:
            return {s: _json(v) for s, v in values.items()}

        d = {
            "model": self.model,
            "sensors": list(self.sensors),
            "sigma": per_sensor(self.sigma),
            "metrics": {s: per_sensor(m) for s, m in self.metrics.items()},
            "normalised_mean": per_sensor(self.normalised_mean),
            "normalised_std": per_sensor(self.normalised_std),
            "outside_band": per_sensor(self.outside_band),
            "outside_band_all": _json(self.outside_band_all),
            "band_quantile": Z95,
            "n_series": int(self.n_series),
            "n_steps": int(self.n_steps),
            "corrected": bool(self.corrected),
        }
        json.dumps(d)  # plain JSON types only
        return d


def _check_table(table: Any) -> None:
    if not isinstance(table, pd.DataFrame):
        raise InputError(f"table: expected a DataFrame, got {type(table).__name__}")
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"table: lacks column(s) {missing}; expected {list(COLUMNS)}")
    for col in ("force_setpoint_N", "force_N", "displacement_um"):
        values = pd.to_numeric(table[col], errors="coerce").to_numpy(float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise InputError(
                f"table: column {col} must be finite numbers; row {int(bad[0])} is "
                f"{str(table[col].iloc[bad[0]])[:40]!r}"
            )


def _sigma_map(sigma: Any) -> dict[str, float]:
    if isinstance(sigma, pd.DataFrame):
        if not {"sensor", "sigma_um"} <= set(sigma.columns):
            raise InputError("sigma: a sensor sheet needs columns sensor and sigma_um")
        return dict(zip(sigma["sensor"].astype(str), sigma["sigma_um"].astype(float)))
    if not isinstance(sigma, Mapping):
        raise InputError("sigma: give the sensor standard deviations (um) as sensor -> value")
    return {str(k): v for k, v in sigma.items()}


def _validation_sensors(
    model: Any, table: pd.DataFrame, sigma: Mapping[str, float], sensors: Sequence[str] | None
) -> list[str]:
    """Default: the model's sensors that have data in the table and a sigma."""
    if sensors is not None:
        return [str(s) for s in sensors]
    present = set(table["sensor"].astype(str))
    chosen = [str(s) for s in model.sensors if s in present and s in sigma]
    if not chosen:
        raise InputError(
            f"sensors: none of the model's sensors {list(model.sensors)} has both rows in the "
            f"table (it has {sorted(present)[:10]}) and a sigma (given for {sorted(sigma)[:10]})"
        )
    return chosen


def validate_predictions(
    model: Any,
    parameters: Mapping[str, float],
    covariance: Any,
    sigma: Mapping[str, float] | pd.DataFrame,
    table: pd.DataFrame,
    sensors: Sequence[str] | None = None,
    *,
    correct: bool = True,
) -> PressValidation:
    """Compare ``model`` at ``parameters`` (with ``covariance``) with every series of ``table``.

    ``sigma``: sensor -> std (um) of the measurements (e.g. ``ParameterFit.sigma``) or a
    sensor sheet (sensor, sigma_um). ``sensors``: default the model's sensors with rows in the
    table and a sigma. A table with ``force_N`` off the setpoints is corrected to them first
    (``correct=True``) or refused (``correct=False``); see the module docstring.
    """
    _check_table(table)
    sig_map = _sigma_map(sigma)
    chosen = _validation_sensors(model, table, sig_map, sensors)
    data, _ = model_data(model, table, chosen)
    corrected = not data.corrected
    if corrected:
        if not correct:
            raise InputError(
                "table: force_N differs from force_setpoint_N; the model is evaluated at the "
                "setpoints: correct the table (correct_to_setpoints) or pass correct=True"
            )
        subset = table[table["sensor"].astype(str).isin(chosen)]
        data, _ = model_data(model, correct_to_setpoints(subset), chosen)
    sig, _ = resolve_sigma(sig_map, data)
    pred = predict_displacements(model, parameters, covariance, data.setpoints, chosen)
    z = data.z
    e = (z - pred.mean[None]) / np.sqrt(sig**2 + pred.std**2)[None]
    metrics = {
        s: output_metrics(z[:, :, k], np.broadcast_to(pred.mean[:, k], z.shape[:2]), name=s)
        for k, s in enumerate(chosen)
    }
    outside = np.abs(e) > Z95
    return PressValidation(
        model=pred.model,
        sensors=tuple(chosen),
        sigma=dict(zip(chosen, sig.tolist())),
        metrics=metrics,
        normalised_mean=dict(zip(chosen, e.mean(axis=(0, 1)).tolist())),
        normalised_std=dict(zip(chosen, _std(e).tolist())),
        outside_band=dict(zip(chosen, outside.mean(axis=(0, 1)).tolist())),
        outside_band_all=float(outside.mean()),
        n_series=int(z.shape[0]),
        n_steps=int(z.shape[1]),
        corrected=corrected,
        prediction=pred,
        residuals=_residual_table(data.series, data.steps, pred, z, e),
    )


def _std(e: np.ndarray) -> np.ndarray:
    """Sample standard deviation per sensor over (series, step); NaN for a single value."""
    n = e.shape[0] * e.shape[1]
    if n < 2:
        return np.full(e.shape[2], np.nan)
    return e.reshape(n, -1).std(axis=0, ddof=1)


def _residual_table(
    series: np.ndarray, steps: np.ndarray, pred: PressPrediction, z: np.ndarray, e: np.ndarray
) -> pd.DataFrame:
    n_m, n_q, n_s = z.shape
    return pd.DataFrame(
        {
            "series": np.repeat(series, n_q * n_s),
            "step": np.tile(np.repeat(steps, n_s), n_m),
            "force_N": np.tile(np.repeat(pred.forces, n_s), n_m),
            "sensor": np.tile(np.array(pred.sensors, dtype=object), n_m * n_q),
            "measured": z.ravel(),
            "predicted": np.tile(pred.mean.ravel(), n_m),
            "std_um": np.tile(pred.std.ravel(), n_m),
            "normalised": e.ravel(),
        }
    )

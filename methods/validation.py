"""Validation metrics of a simulated or predicted output against a measured one.

For one output ``y`` (N,) and its prediction ``y_hat`` (N,):

- ``rmse`` = sqrt(mean((y - y_hat)^2)), in the output's unit;
- ``fit`` = 100 (1 - ||y - y_hat|| / ||y - mean(y)||) in percent (the "fit index" of system
  identification, e.g. MATLAB's ``compare``; 100 is perfect, 0 is no better than the mean,
  it can be negative);
- ``r2`` = 1 - ||y - y_hat||^2 / ||y - mean(y)||^2 (coefficient of determination; note
  ``r2 = 1 - (1 - fit/100)^2``);
- ``max_abs`` = max |y - y_hat|; ``n`` the number of samples.

A constant measured output has no variance to explain: ``fit`` and ``r2`` are NaN then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from methods.errors import InputError

METRICS = ("rmse", "fit", "r2", "max_abs", "n")


def output_metrics(measured: Any, predicted: Any, *, name: str = "output") -> dict[str, float]:
    """RMSE, fit index [%], R^2, max |error| and sample count of one output (see module)."""
    y = np.asarray(measured, dtype=float).ravel()
    y_hat = np.asarray(predicted, dtype=float).ravel()
    if y.shape != y_hat.shape:
        raise InputError(f"{name}: {y.size} measured but {y_hat.size} predicted samples")
    if y.size == 0:
        raise InputError(f"{name}: no samples to compare")
    if not (np.isfinite(y).all() and np.isfinite(y_hat).all()):
        raise InputError(f"{name}: measured and predicted values must be finite")
    error = y - y_hat
    spread = float(np.linalg.norm(y - y.mean()))
    residual = float(np.linalg.norm(error))
    relative = residual / spread if spread > 0 else float("nan")
    return {
        "rmse": float(np.sqrt(np.mean(error**2))),
        "fit": 100.0 * (1.0 - relative),
        "r2": 1.0 - relative**2,
        "max_abs": float(np.max(np.abs(error))),
        "n": float(y.size),
    }


def flat_metrics(per_output: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``{output: {metric: v}}`` -> ``{"<output>.<metric>": v}`` (MLflow metric keys)."""
    return {
        f"{out}.{key}": float(v) for out, values in per_output.items() for key, v in values.items()
    }

"""NIST StRD nonlinear-regression problems as ``ResponseModel`` plugins (tests and benchmark).

Each dataset (``data/nist_strd/<name>.dat``, NIST public domain, see the README there) becomes
a one-sensor model ``y`` whose "forces" are the predictor ``x`` in data order, one series,
``sigma = 1``: then ``fit_parameters`` minimises ``1/2 sum (f(x_j; b) - y_j)^2`` =
``RSS / 2``, and the NIST standard deviations are ``s sqrt(diag(C1))`` with
``s^2 = RSS / (n - p)``.

Nelson has two predictors (``log y = b1 - b2 x1 exp(-b3 x2)``): the forces carry ``x1`` and
the model plugin holds ``x2`` for the same step order (a second predictor is a property of the
scenario, fixed per step); its response is ``log y``, the data are ``log y``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import casadi as ca
import numpy as np
import pandas as pd

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "nist_strd"

_NP = SimpleNamespace(exp=np.exp, cos=np.cos, sin=np.sin, atan=np.arctan, pi=math.pi)
_CA = SimpleNamespace(exp=ca.exp, cos=ca.cos, sin=ca.sin, atan=ca.atan, pi=math.pi)

Expr = Callable[[Any, Any, Any], Any]  # (b, x, m) -> y, m = numpy- or casadi-like namespace


def _gauss(b, x, m):
    return (
        b[0] * m.exp(-b[1] * x)
        + b[2] * m.exp(-((x - b[3]) ** 2) / b[4] ** 2)
        + b[5] * m.exp(-((x - b[6]) ** 2) / b[7] ** 2)
    )


def _lanczos(b, x, m):
    return b[0] * m.exp(-b[1] * x) + b[2] * m.exp(-b[3] * x) + b[4] * m.exp(-b[5] * x)


def _rat3(b, x, m):  # cubic / cubic (Hahn1, Thurber)
    return (b[0] + b[1] * x + b[2] * x**2 + b[3] * x**3) / (
        1 + b[4] * x + b[5] * x**2 + b[6] * x**3
    )


def _enso(b, x, m):
    w = 2 * m.pi * x
    return (
        b[0]
        + b[1] * m.cos(w / 12)
        + b[2] * m.sin(w / 12)
        + b[4] * m.cos(w / b[3])
        + b[5] * m.sin(w / b[3])
        + b[7] * m.cos(w / b[6])
        + b[8] * m.sin(w / b[6])
    )


# the model lines of the .dat files, transcribed (b[i] = b_{i+1})
MODELS: dict[str, Expr] = {
    "Misra1a": lambda b, x, m: b[0] * (1 - m.exp(-b[1] * x)),
    "Chwirut2": lambda b, x, m: m.exp(-b[0] * x) / (b[1] + b[2] * x),
    "Chwirut1": lambda b, x, m: m.exp(-b[0] * x) / (b[1] + b[2] * x),
    "Lanczos3": _lanczos,
    "Gauss1": _gauss,
    "Gauss2": _gauss,
    "DanWood": lambda b, x, m: b[0] * x ** b[1],
    "Misra1b": lambda b, x, m: b[0] * (1 - (1 + b[1] * x / 2) ** (-2)),
    "Kirby2": lambda b, x, m: (b[0] + b[1] * x + b[2] * x**2) / (1 + b[3] * x + b[4] * x**2),
    "Hahn1": _rat3,
    "Nelson": lambda b, x, m: b[0] - b[1] * x[0] * m.exp(-b[2] * x[1]),
    "MGH17": lambda b, x, m: b[0] + b[1] * m.exp(-x * b[3]) + b[2] * m.exp(-x * b[4]),
    "Lanczos1": _lanczos,
    "Lanczos2": _lanczos,
    "Gauss3": _gauss,
    "Misra1c": lambda b, x, m: b[0] * (1 - (1 + 2 * b[1] * x) ** (-0.5)),
    "Misra1d": lambda b, x, m: b[0] * b[1] * x * ((1 + b[1] * x) ** (-1)),
    "Roszman1": lambda b, x, m: b[0] - b[1] * x - m.atan(b[2] / (x - b[3])) / m.pi,
    "ENSO": _enso,
    "MGH09": lambda b, x, m: b[0] * (x**2 + x * b[1]) / (x**2 + x * b[2] + b[3]),
    "Thurber": _rat3,
    "BoxBOD": lambda b, x, m: b[0] * (1 - m.exp(-b[1] * x)),
    "Rat42": lambda b, x, m: b[0] / (1 + m.exp(b[1] - b[2] * x)),
    "MGH10": lambda b, x, m: b[0] * m.exp(b[1] / (x + b[2])),
    "Eckerle4": lambda b, x, m: (b[0] / b[1]) * m.exp(-0.5 * ((x - b[2]) / b[1]) ** 2),
    "Rat43": lambda b, x, m: b[0] / ((1 + m.exp(b[1] - b[2] * x)) ** (1 / b[3])),
    "Bennett5": lambda b, x, m: b[0] * (b[1] + x) ** (-1 / b[2]),
}
SINGLE_PREDICTOR = tuple(n for n in MODELS if n != "Nelson")
LEVEL = {
    **dict.fromkeys(
        "Misra1a Chwirut2 Chwirut1 Lanczos3 Gauss1 Gauss2 DanWood Misra1b".split(), "lower"
    ),
    **dict.fromkeys(
        "Kirby2 Hahn1 Nelson MGH17 Lanczos1 Lanczos2 Gauss3 Misra1c Misra1d Roszman1 ENSO".split(),
        "average",
    ),
    **dict.fromkeys("MGH09 Thurber BoxBOD Rat42 MGH10 Eckerle4 Rat43 Bennett5".split(), "higher"),
}


@dataclass(frozen=True)
class Dataset:
    """One StRD problem: ``starts`` (2, p), ``certified`` (p,), ``certified_sd`` (p,),
    ``rss`` certified residual sum of squares, ``x`` (n,) or (n, 2) predictors, ``y`` (n,)."""

    name: str
    starts: np.ndarray
    certified: np.ndarray
    certified_sd: np.ndarray
    rss: float
    x: np.ndarray
    y: np.ndarray
    level: str = field(default="")

    @property
    def n_parameters(self) -> int:
        return int(self.certified.size)


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def load(name: str) -> Dataset:
    """Parse ``data/nist_strd/<name>.dat`` (NIST's fixed layout)."""
    text = (DATA_DIR / f"{name}.dat").read_text()
    rows = re.findall(
        rf"^\s*b(\d+)\s*=\s*({_NUM})\s+({_NUM})\s+({_NUM})\s+({_NUM})\s*$", text, flags=re.M
    )
    vals = np.array([[float(v) for v in r[1:]] for r in sorted(rows, key=lambda r: int(r[0]))])
    rss_match = re.search(rf"Residual Sum of Squares:\s*({_NUM})", text)
    assert rss_match is not None, name
    lines = text.splitlines()
    start = max(i for i, ln in enumerate(lines) if re.match(r"^\s*Data:\s+y\s", ln)) + 1
    data = np.array([[float(v) for v in ln.split()] for ln in lines[start:] if ln.strip()])
    y, x = data[:, 0], data[:, 1:]
    if name == "Nelson":
        y = np.log(y)  # NIST fits log[y]
    else:
        x = x[:, 0]
    return Dataset(
        name, vals[:, :2].T.copy(), vals[:, 2].copy(), vals[:, 3].copy(),
        float(rss_match.group(1)), x, y, LEVEL[name],
    )  # fmt: skip


class StrdModel:
    """``ResponseModel`` plugin of one StRD problem (see the module docstring)."""

    sensors = ("y",)

    def __init__(self, data: Dataset, start: int = 1) -> None:
        self.name = f"{data.name}/start{start}"
        self.expr = MODELS[data.name]
        self.x2 = data.x[:, 1].copy() if data.x.ndim == 2 else None
        self.parameters = {f"b{i + 1}": float(v) for i, v in enumerate(data.starts[start - 1])}

    def response(self, p: Any, forces: Any) -> Any:
        if isinstance(p, ca.SX | ca.MX) or isinstance(forces, ca.SX | ca.MX):
            bs = [p[i] for i in range(len(self.parameters))]
            xs = forces if self.x2 is None else (forces, ca.DM(self.x2))
            out = self.expr(bs, xs, _CA)
            return ca.SX(out) if isinstance(p, ca.SX) else out
        q = np.asarray(forces, float)
        x = q if self.x2 is None else (q, self.x2)
        return np.asarray(self.expr(np.asarray(p, float), x, _NP), float)[:, None]


def table(data: Dataset) -> pd.DataFrame:
    """Long press-format table: one series, step j = observation j, force = x (x1 for Nelson)."""
    x = data.x if data.x.ndim == 1 else data.x[:, 0]
    n = x.size
    return pd.DataFrame(
        {
            "series": np.zeros(n, dtype=int),
            "step": np.arange(n),
            "force_setpoint_N": x,
            "force_N": x,
            "sensor": "y",
            "displacement_um": data.y,
        }
    )


def lre(estimate: np.ndarray, certified: np.ndarray) -> np.ndarray:
    """Log relative error, number of matching significant digits, capped at 11 (the
    certified values' precision): ``-log10(|estimate - certified| / |certified|)``."""
    est, cert = np.asarray(estimate, float), np.asarray(certified, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(est - cert) / np.abs(cert)
        out = np.where(rel > 0, -np.log10(rel), 11.0)
    return np.clip(np.where(np.isfinite(out), out, 0.0), 0.0, 11.0)

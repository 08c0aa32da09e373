"""Lab tables <-> arrays, measurement correction to setpoints, sensor sigma from repeats.

Table format (long, one row per (series, step, sensor)): ``series`` int, ``step`` int (order of
the loading-unloading scenario), ``force_setpoint_N``, ``force_N`` (measured), ``sensor`` str,
``displacement_um``. Schema validation lives in ``schemas/``; here only what the method needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError

COLUMNS = ("series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um")


@dataclass(frozen=True)
class PressData:
    """Measurements as a dense cube.

    Fields: ``z`` (n_M, n_q, n_S) displacements, um; ``forces`` (n_M, n_q) measured forces, N;
    ``setpoints`` (n_q,) N; ``series``/``steps`` the original ids (n_M,), (n_q,);
    ``sensors`` names (n_S,) in the order asked for; ``loading`` (n_q,) bool, True up to and
    including the (first) maximum setpoint.
    """

    z: np.ndarray
    forces: np.ndarray
    setpoints: np.ndarray
    series: np.ndarray
    steps: np.ndarray
    sensors: tuple[str, ...]
    loading: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.z.shape  # type: ignore[return-value]

    @property
    def corrected(self) -> bool:
        """True when measured forces equal the setpoints (to 1e-9 relative)."""
        scale = max(1.0, float(np.abs(self.setpoints).max()))
        return bool(np.abs(self.forces - self.setpoints[None, :]).max() <= 1e-9 * scale)


def _columns(table: pd.DataFrame) -> Mapping[str, Any]:
    """The table's columns by name, after checking that the needed ones are there and that the
    table is not empty: their values (numpy or pandas extension arrays) straight from the
    frame's blocks where pandas offers that (``DataFrame._get_column_array``), else Series. A
    ``Series`` per column (``items()``; ``table[name]`` also builds the column index's hash
    table) was a third of a small fit's pivot of a new table."""
    names = table.columns.to_numpy(dtype=object)  # (tolist() of a str index is slower)
    cols: dict[str, Any]
    get = getattr(table, "_get_column_array", None)
    if len(set(names)) != len(names):  # a repeated name: as table[name] (a frame), fails below
        cols = {c: table[c] for c in COLUMNS if c in set(names)}
    elif get is None:  # another pandas
        cols = {name: col for name, col in table.items() if isinstance(name, str)}
    else:
        cols = {name: get(i) for i, name in enumerate(names) if isinstance(name, str)}
    missing = [c for c in COLUMNS if c not in cols]
    if missing:
        raise InputError(f"table lacks column(s) {missing}; expected {list(COLUMNS)}")
    if len(table) == 0:
        raise InputError("table is empty")
    return cols


def _numpy(values: Any, dtype: Any = None) -> np.ndarray:
    """``Series.to_numpy(dtype)`` of a column's values (an array, or a Series or frame)."""
    if isinstance(values, np.ndarray):
        return values if dtype is None else np.asarray(values, dtype=dtype)
    return values.to_numpy(dtype=dtype)


def _unique(ids: np.ndarray) -> np.ndarray:
    """``np.unique`` of integer ids by a sort (its hash table: 4x slower on 250 steps)."""
    if ids.dtype.kind not in "iu" or ids.size == 0:
        return np.unique(ids)
    s = np.sort(ids)
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def to_cube(table: pd.DataFrame, sensors: Sequence[str] | None = None) -> PressData:
    """Pivot the long table to ``PressData``; ``sensors`` picks and orders the sensor axis."""
    # numpy, not pandas sorts or masks: a fit pivots its table every time, and on a small fit
    # (NIST StRD) the pivot of a new table was a tenth of the fit
    cols = _columns(table)
    column = cols["sensor"]
    if isinstance(column.dtype, pd.StringDtype):  # already str: astype(str) would copy it
        names = _numpy(column, object)
    else:
        names = pd.Series(column, copy=False).astype(str).to_numpy()
    present = list(dict.fromkeys(names))
    sensors = tuple(present if sensors is None else sensors)
    unknown = [s for s in sensors if s not in present]
    if unknown:
        raise InputError(f"sensor(s) {unknown} not in the table; it has {present}")
    # every row kept (the usual case: the table has only the sensors asked for): no masks
    keep = None if set(present) <= set(sensors) else np.isin(names, np.array(sensors, dtype=object))

    def rows(values: np.ndarray) -> np.ndarray:
        return values if keep is None else values[keep]

    ser, stp = rows(_numpy(cols["series"])), rows(_numpy(cols["step"]))
    series, steps = _unique(ser), _unique(stp)
    n_m, n_q, n_s = len(series), len(steps), len(sensors)
    kept = rows(names)
    k = np.zeros(kept.size, dtype=np.intp)  # sensor codes (pd.Categorical: 0.3 ms a call)
    for i, s in enumerate(sensors[1:], start=1):
        k[kept == s] = i
    # the array methods, not np.searchsorted, np.ptp, np.argmax: the same routines, without
    # the dispatch a pivot of every fit pays
    flat = (series.searchsorted(ser) * n_q + steps.searchsorted(stp)) * n_s + k
    complete = flat.size == n_m * n_q * n_s
    if complete:  # and every cell once (np.unique's sort, without it: each index is < size)
        hit = np.zeros(flat.size, dtype=bool)
        hit[flat] = True
        complete = bool(hit.all())
    if not complete:
        raise InputError(
            "table must have exactly one row per (series, step, sensor) for every combination "
            f"({n_m} series x {n_q} steps x {n_s} sensors = {n_m * n_q * n_s} rows, got"
            f" {flat.size})"
        )

    def cube(column: str) -> np.ndarray:
        out = np.empty(flat.size)
        out[flat] = rows(_numpy(cols[column], float))
        return out.reshape(n_m, n_q, n_s)

    z = cube("displacement_um")
    forces = cube("force_N")[:, :, 0]
    sp = cube("force_setpoint_N")
    if (sp.max(axis=(0, 2)) - sp.min(axis=(0, 2))).max() > 1e-9 * max(1.0, np.abs(sp).max()):
        raise InputError("force_setpoint_N must be the same for every series and sensor of a step")
    setpoints = sp[0, :, 0]
    loading = np.arange(n_q) <= int(setpoints.argmax())
    return PressData(z, forces, setpoints, series, steps, sensors, loading)


def _interp(x: np.ndarray, y: np.ndarray, xq: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation of (x, y) at xq with linear extrapolation at both ends."""
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if x.size == 1:
        return np.full_like(xq, y[0], dtype=float)
    if np.any(np.diff(x) <= 0):
        raise InputError("two measured forces of one branch coincide: cannot interpolate")
    idx = np.clip(np.searchsorted(x, xq) - 1, 0, x.size - 2)
    x0, x1, y0, y1 = x[idx], x[idx + 1], y[idx], y[idx + 1]
    return y0 + (y1 - y0) * (xq - x0) / (x1 - x0)


def correct_to_setpoints(table: pd.DataFrame) -> pd.DataFrame:
    """Map every series to the setpoint forces along its own loading/unloading branch.

    For series ``i``, branch ``b`` (loading: steps up to the maximum setpoint; unloading: the
    rest), sensor ``k``: ``z_corr(q^d_j) = lin-interp of {(q_ij', z_ij'k) : j' in b}`` at
    ``q^d_j``, extrapolated linearly beyond the extreme measured forces. Exact when the branch
    is linear in the force. Returns a copy with ``displacement_um`` corrected and
    ``force_N = force_setpoint_N``.
    """
    data = to_cube(table)
    z = data.z.copy()
    for branch in (data.loading, ~data.loading):
        if not branch.any():
            continue
        qd = data.setpoints[branch]
        for i in range(z.shape[0]):
            x = data.forces[i, branch]
            for k in range(z.shape[2]):
                z[i, branch, k] = _interp(x, data.z[i, branch, k], qd)
    return from_cube(data, z, forces=np.broadcast_to(data.setpoints, data.forces.shape))


def from_cube(data: PressData, z: np.ndarray, forces: np.ndarray | None = None) -> pd.DataFrame:
    """Long table from a cube shaped like ``data`` (inverse of ``to_cube``)."""
    n_m, n_q, n_s = z.shape
    f = data.forces if forces is None else forces
    return pd.DataFrame(
        {
            "series": np.repeat(data.series, n_q * n_s),
            "step": np.tile(np.repeat(data.steps, n_s), n_m),
            "force_setpoint_N": np.tile(np.repeat(data.setpoints, n_s), n_m),
            "force_N": np.repeat(np.asarray(f, float).ravel(), n_s),
            "sensor": np.tile(np.array(data.sensors, dtype=object), n_m * n_q),
            "displacement_um": z.ravel(),
        }
    )


def sigma_from_repeats(z: np.ndarray) -> np.ndarray:
    """Pooled per-sensor standard deviation (um) from repeated series, shape (n_S,).

    ``s_k^2 = sum_{i,j} (z_ijk - mean_i z_ijk)^2 / (n_q (n_M - 1))``: deviations from the
    per-(step, sensor) series mean, (n_M - 1) degrees of freedom per step (unbiased for
    ``sigma_k^2`` when the error is constant over steps). Needs n_M >= 2.
    """
    n_m, n_q, _ = z.shape
    if n_m < 2:
        raise InputError("estimating sigma from repeats needs at least 2 series; pass sigma=")
    dev = z - z.mean(axis=0, keepdims=True)
    s = np.sqrt((dev**2).sum(axis=(0, 1)) / (n_q * (n_m - 1)))
    if np.any(s <= 0):
        raise InputError("a sensor has zero scatter over the series: pass sigma= explicitly")
    return s


def resolve_sigma(
    sigma: Mapping[str, float] | pd.DataFrame | None, data: PressData
) -> tuple[np.ndarray, str]:
    """Sigma per sensor of ``data`` (um) and its source ("sheet" or "repeats")."""
    if sigma is None:
        return sigma_from_repeats(data.z), "repeats"
    if isinstance(sigma, pd.DataFrame):
        sigma = dict(zip(sigma["sensor"].astype(str), sigma["sigma_um"].astype(float)))
    missing = [s for s in data.sensors if s not in sigma]
    if missing:
        raise InputError(f"sigma lacks sensor(s) {missing}; given for {sorted(sigma)}")
    out = np.array([float(sigma[s]) for s in data.sensors])
    if not np.isfinite(out).all() or (out <= 0).any():
        raise InputError(f"sigma must be positive and finite, got {dict(zip(data.sensors, out))}")
    return out, "sheet"

"""Contracts for press lab measurements and sensor sheets.

Measurement table, long format, one row per (series, step, sensor):

| column             | type  | rule                                                    |
|--------------------|-------|---------------------------------------------------------|
| `series`           | int   | >= 0, repetition of the whole loading-unloading scenario |
| `step`             | int   | >= 0, position in the scenario (order matters)          |
| `force_setpoint_N` | float | >= 0, finite, commanded process force [N]               |
| `force_N`          | float | >= 0, finite, measured process force [N]                |
| `sensor`           | str   | sensor name, as the model names it                      |
| `displacement_um`  | float | finite, measured displacement [µm]                      |

Unique key (series, step, sensor); every series has every step and every sensor.

Sensor sheet: `sensor` (str, unique), `sigma_um` (float > 0, finite): the constant standard
deviation of each sensor. Without a sheet the methods estimate sigma from the repeated series
(pooled over steps, see `methods.press`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrors
from pandera.typing import Series

from schemas.errors import DataError, describe_failure_cases
from schemas.lab_files import read_limited

KEY = ["series", "step", "sensor"]


def _finite(series: pd.Series) -> Series[bool]:
    finite = pd.Series(np.isfinite(series.to_numpy(dtype=float)), index=series.index)
    return cast("Series[bool]", finite)  # pandera checks get and return a plain pd.Series


#: plausible magnitudes no real press exceeds (the largest forging presses: ~1e9 N, strokes
#: of metres): a value beyond them is a unit or export error (1e308, a factor 1e300)
MAX_FORCE_N = 1e12
MAX_DISPLACEMENT_UM = 1e9  # 1 km


class PressMeasurements(pa.DataFrameModel):
    series: Series[int] = pa.Field(ge=0)
    step: Series[int] = pa.Field(ge=0)
    force_setpoint_N: Series[float] = pa.Field(ge=0, le=MAX_FORCE_N)
    force_N: Series[float] = pa.Field(ge=0, le=MAX_FORCE_N)
    sensor: Series[str] = pa.Field(str_length={"min_value": 1})
    displacement_um: Series[float]

    @pa.check("force_setpoint_N", "force_N", "displacement_um", name="finite")
    @classmethod
    def finite(cls, series: Series[float]) -> Series[bool]:
        return _finite(series)

    @pa.check("displacement_um", name=f"|displacement_um| <= {MAX_DISPLACEMENT_UM:g} um")
    @classmethod
    def plausible(cls, series: Series[float]) -> Series[bool]:
        values = series.to_numpy(dtype=float)
        ok = pd.Series(~(np.abs(values) > MAX_DISPLACEMENT_UM), index=series.index)
        return cast("Series[bool]", ok)

    class Config:
        coerce = True
        strict = False


#: columns declared `int`: their values must be integral before coercion (which truncates)
INTEGER_COLUMNS: dict[type[pa.DataFrameModel], tuple[str, ...]] = {}


class SensorSheet(pa.DataFrameModel):
    """A sensor sheet: the standard deviation of each sensor, and for a sensor design the
    candidates (every listed sensor) with an optional cost each (installation, channel)."""

    sensor: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    sigma_um: Series[float] = pa.Field(gt=0)
    cost: Series[float] | None = pa.Field(ge=0)

    @pa.check("sigma_um", name="finite")
    @classmethod
    def finite(cls, series: Series[float]) -> Series[bool]:
        return _finite(series)

    @pa.check("cost", name="finite")
    @classmethod
    def finite_cost(cls, series: Series[float]) -> Series[bool]:
        return _finite(series)

    class Config:
        coerce = True
        strict = False


INTEGER_COLUMNS[PressMeasurements] = ("series", "step")


def _validate(model: type[pa.DataFrameModel], frame: pd.DataFrame, source: str) -> pd.DataFrame:
    required = [name for name, column in model.to_schema().columns.items() if column.required]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {missing}; expected columns {required}, "
            f"found {list(frame.columns)}"
        )
    frame = frame.reset_index(drop=True)  # row numbers in messages are data rows from 0
    # Coercion would truncate 0.5 to 0: integer columns are checked for integral values first.
    integral = _non_integral(frame, [c for c in INTEGER_COLUMNS.get(model, ()) if c in frame])
    try:
        validated = model.validate(frame, lazy=True)
    except SchemaErrors as exc:
        cases = pd.concat([integral, exc.failure_cases], ignore_index=True)
        raise DataError(describe_failure_cases(cases, source=source)) from None
    except SchemaError as exc:  # pragma: no cover - lazy mode collects, but be safe
        raise DataError(f"{source}: {exc}") from None
    if not integral.empty:
        raise DataError(describe_failure_cases(integral, source=source))
    known = [c for c in model.to_schema().columns if c in validated.columns]
    return validated[known].reset_index(drop=True)


def _non_integral(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Rows whose value in an integer column is a number with a fractional part (0.5, 1.5),
    in pandera's `failure_cases` layout; text and missing values are left to the schema."""
    cases = []
    for column in columns:
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        bad = values.notna() & np.isfinite(values) & (values != np.floor(values))
        for index in frame.index[bad.to_numpy()]:
            cases.append(
                {"column": column, "check": "integer (no fractional part)",
                 "failure_case": frame.at[index, column], "index": index}
            )  # fmt: skip
    return pd.DataFrame(cases, columns=["column", "check", "failure_case", "index"])


def _check_unique(table: pd.DataFrame, source: str) -> None:
    duplicated = table[table.duplicated(KEY, keep=False)]
    if duplicated.empty:
        return
    # pandas-stubs type group keys as Hashable; grouped by a list of columns they are tuples
    groups = cast(
        list[tuple[tuple[Any, ...], pd.Index]],
        list(duplicated.groupby(KEY, sort=True).groups.items()),
    )
    shown = "; ".join(
        f"(series {k[0]}, step {k[1]}, sensor '{k[2]}') at rows {[int(i) for i in rows]}"
        for k, rows in groups[:5]
    )
    more = f"; and {len(groups) - 5} more" if len(groups) > 5 else ""
    raise DataError(f"{source}: duplicate key (series, step, sensor): {shown}{more}")


def _check_complete(table: pd.DataFrame, source: str) -> None:
    steps = sorted(int(s) for s in table["step"].unique())
    sensors = sorted(table["sensor"].unique())
    problems: list[str] = []
    for series, group in table.groupby("series", sort=True):
        present = set(zip(group["step"], group["sensor"]))
        missing_steps = [int(s) for s in steps if not any((s, k) in present for k in sensors)]
        missing_pairs = [
            (int(s), k)
            for s in steps
            for k in sensors
            if (s, k) not in present and s not in missing_steps
        ]
        if missing_steps:
            problems.append(f"series {series} lacks step(s) {missing_steps}")
        if missing_pairs:
            shown = ", ".join(f"step {s}/sensor '{k}'" for s, k in missing_pairs[:5])
            more = f" and {len(missing_pairs) - 5} more" if len(missing_pairs) > 5 else ""
            problems.append(f"series {series} lacks {shown}{more}")
    if problems:
        raise DataError(
            f"{source}: every series must have every step and sensor "
            f"(steps {steps[0]}..{steps[-1]}, sensors {sensors}): " + "; ".join(problems)
        )


def validate_press_table(frame: pd.DataFrame, *, source: str = "table") -> pd.DataFrame:
    """Validate a measurement table; return it coerced, sorted by (series, step, sensor)."""
    table = _validate(PressMeasurements, frame, source)
    _check_unique(table, source)
    _check_complete(table, source)
    return table.sort_values(KEY, kind="stable").reset_index(drop=True)


def validate_sensor_sheet(
    frame: pd.DataFrame, *, sensors: list[str] | None = None, source: str = "sensor sheet"
) -> dict[str, float]:
    """Validate a sensor sheet; with `sensors`, every sheet entry must be a known sensor."""
    sheet = _validate(SensorSheet, frame, source)
    sigma = dict(zip(sheet["sensor"], sheet["sigma_um"].astype(float)))
    if sensors is not None:
        unknown = sorted(set(sigma) - set(sensors))
        if unknown:
            raise DataError(
                f"{source}: unknown sensor(s) {unknown}; the measurements have {sorted(sensors)}"
            )
        lacking = sorted(set(sensors) - set(sigma))
        if lacking:
            raise DataError(f"{source}: no sigma_um for sensor(s) {lacking}")
    return sigma


def load_press_table(path: str | Path) -> pd.DataFrame:
    """Read (within `schemas.lab_files.FileLimits`) and validate a measurement table."""
    return validate_press_table(read_limited(path), source=str(path))


def load_sensor_sheet(path: str | Path, *, sensors: list[str] | None = None) -> dict[str, float]:
    """Read and validate a sensor sheet (CSV or Parquet) into {sensor: sigma_um}."""
    return validate_sensor_sheet(read_limited(path), sensors=sensors, source=str(path))


def load_candidate_sheet(path: str | Path) -> tuple[dict[str, float], dict[str, float] | None]:
    """A sensor sheet as design candidates: ({sensor: sigma_um}, {sensor: cost} or None when
    the sheet has no ``cost`` column)."""
    frame = read_limited(path)
    sheet = _validate(SensorSheet, frame, str(path))
    sigma = dict(zip(sheet["sensor"], sheet["sigma_um"].astype(float)))
    if "cost" not in sheet.columns:
        return sigma, None
    return sigma, dict(zip(sheet["sensor"], sheet["cost"].astype(float)))

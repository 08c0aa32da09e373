"""The press measurement contract: every kind of bad table gets a message naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from schemas.errors import DataError
from schemas.press import load_press_table, validate_press_table, validate_sensor_sheet


def good_table(n_series: int = 3, n_steps: int = 4, sensors=("a", "b")) -> pd.DataFrame:
    rows = [
        {
            "series": s,
            "step": j,
            "force_setpoint_N": 100.0 * j,
            "force_N": 100.0 * j + 0.5,
            "sensor": k,
            "displacement_um": 0.01 * j + s,
        }
        for s in range(n_series)
        for j in range(n_steps)
        for k in sensors
    ]
    return pd.DataFrame(rows)


def test_valid_table_round_trips_sorted() -> None:
    frame = good_table().sample(frac=1.0, random_state=3)
    out = validate_press_table(frame)
    assert list(out.columns) == [
        "series",
        "step",
        "force_setpoint_N",
        "force_N",
        "sensor",
        "displacement_um",
    ]
    assert out[["series", "step", "sensor"]].equals(
        good_table()[["series", "step", "sensor"]].astype(out[["series", "step", "sensor"]].dtypes)
    )


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda f: f.drop(columns=["force_N"]), "missing column(s) ['force_N']"),
        (
            lambda f: f.assign(displacement_um=f["displacement_um"].where(f.index != 5)),
            "'displacement_um' at row 5: failed not_nullable",
        ),
        (
            lambda f: f.assign(displacement_um=f["displacement_um"].where(f.index != 7, np.inf)),
            "'displacement_um' at row 7: failed finite",
        ),
        (
            lambda f: f.assign(force_N=f["force_N"].where(f.index != 3, -2.0)),
            "'force_N' at row 3: failed greater_than_or_equal_to(0)",
        ),
        (
            lambda f: pd.concat([f, f.iloc[[4]]], ignore_index=True),
            "duplicate key (series, step, sensor): (series 0, step 2, sensor 'a') at rows [4, 24]",
        ),
        (lambda f: f.drop(index=[6, 7]), "series 0 lacks step(s) [3]"),
        (lambda f: f.drop(index=[9]), "series 1 lacks step 0/sensor 'b'"),
        (
            lambda f: f.astype({"force_N": object}).assign(
                force_N=lambda g: g["force_N"].where(g.index != 2, "12,5kN")
            ),
            "'force_N' at row 2: failed coerce_dtype('float64') (value: '12,5kN')",
        ),
    ],
    ids=[
        "missing-column",
        "nan",
        "inf",
        "negative-force",
        "duplicate-key",
        "missing-step",
        "missing-sensor",
        "text-in-number",
    ],
)
def test_bad_tables_name_the_problem(mutate, expected: str) -> None:
    with pytest.raises(DataError) as info:
        validate_press_table(mutate(good_table()))
    assert expected in str(info.value)


def test_text_in_numeric_column_reports_only_the_cause() -> None:
    frame = good_table().astype({"force_N": object})
    frame.loc[2, "force_N"] = "abc"
    with pytest.raises(DataError) as info:
        validate_press_table(frame)
    assert "1 problem(s)" in str(info.value)


def test_sensor_sheet_rejects_unknown_and_missing_sensors() -> None:
    with pytest.raises(DataError, match=r"unknown sensor\(s\) \['c'\]"):
        validate_sensor_sheet(
            pd.DataFrame({"sensor": ["a", "b", "c"], "sigma_um": [1, 2, 3]}), sensors=["a", "b"]
        )
    with pytest.raises(DataError, match=r"no sigma_um for sensor\(s\) \['b'\]"):
        validate_sensor_sheet(
            pd.DataFrame({"sensor": ["a"], "sigma_um": [1.0]}), sensors=["a", "b"]
        )
    with pytest.raises(DataError, match="greater_than"):
        validate_sensor_sheet(pd.DataFrame({"sensor": ["a", "b"], "sigma_um": [1.0, 0.0]}))


def test_files_empty_unknown_and_parquet(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match=r"empty\.csv: the file is empty"):
        load_press_table(empty)
    header_only = tmp_path / "header.csv"
    header_only.write_text(",".join(good_table().columns) + "\n")
    with pytest.raises(DataError, match="header but no data rows"):
        load_press_table(header_only)
    excel = tmp_path / "x.xlsx"
    excel.write_text("x")
    with pytest.raises(DataError, match="unknown file type"):
        load_press_table(excel)
    parquet = tmp_path / "t.parquet"
    good_table().to_parquet(parquet)
    assert len(load_press_table(parquet)) == len(good_table())

"""Readable errors for tables that break their contract."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from methods.errors import InputError


class DataError(InputError):
    """A data file or table violates its contract. The message names file, rows and fields."""


def describe_failure_cases(failure_cases: pd.DataFrame, *, source: str, limit: int = 12) -> str:
    """Turn pandera's lazy `failure_cases` table into a message a person can act on.

    Each line names the column (or "table" for whole-frame checks), the check that failed,
    the offending value and the row index (0-based data rows of the file).
    """
    failure_cases = _drop_follow_on_failures(failure_cases)
    lines = [
        f"{source}: {len(failure_cases)} problem(s) found (rows counted from 0 after the header):"
    ]
    for row in failure_cases.head(limit).itertuples(index=False):
        column = getattr(row, "column", None)
        column = (
            "table" if column is None or (isinstance(column, float) and pd.isna(column)) else column
        )
        check = getattr(row, "check", "")
        value = getattr(row, "failure_case", "")
        index = getattr(row, "index", None)
        where = (
            ""
            if index is None or (isinstance(index, float) and pd.isna(index))
            else f" at row {int(index)}"
        )
        lines.append(f"  - column '{column}'{where}: failed {check!s} (value: {value!r})")
    if len(failure_cases) > limit:
        lines.append(f"  ... and {len(failure_cases) - limit} more")
    return "\n".join(lines)


def _drop_follow_on_failures(failure_cases: pd.DataFrame) -> pd.DataFrame:
    """Text in a numeric column fails coercion, then every check of that column again:
    keep the coercion failure (it names the row and value) and drop the echoes."""
    if "check" not in failure_cases or "column" not in failure_cases:
        return failure_cases
    checks = failure_cases["check"].astype(str)
    coerced = set(failure_cases.loc[checks.str.startswith("coerce_dtype"), "column"])
    echo = failure_cases["column"].isin(coerced) & ~checks.str.startswith("coerce_dtype")
    return failure_cases.loc[~echo].reset_index(drop=True)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame; unreadable or empty files raise DataError."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the file is empty")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path)
        elif suffix in {".parquet", ".pq"}:
            frame = pd.read_parquet(path)
        else:
            raise DataError(f"{path}: unknown file type '{suffix}' (expected .csv or .parquet)")
    except DataError:
        raise
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file has no header and no rows") from None
    except Exception as exc:  # parser errors of pandas/pyarrow: report, don't crash
        raise DataError(f"{path}: cannot be read as {suffix[1:]}: {exc}") from None
    if frame.empty:
        raise DataError(f"{path}: the file has a header but no data rows")
    return frame

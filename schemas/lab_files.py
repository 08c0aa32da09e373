"""Reading lab files (CSV, Parquet) within resource limits, checked before reading everything.

A 68 KB Parquet file can hold 5e6 rows (1.4 GB in memory); a worker must not be OOM-killed by
one file. The limits (`FileLimits`, environment `GREYLAB_MAX_FILE_BYTES`,
`GREYLAB_MAX_FILE_ROWS`) are checked in this order: the file size (from `stat`, before any
read), the number of columns (CSV header / Parquet schema), the number of rows (Parquet
metadata; a CSV is read with `nrows = limit + 1`, so memory stays bounded), and, for Parquet,
text values are read dictionary-encoded and their length checked before they are expanded.
Defaults fit a 2-core, 24 GiB machine that runs other jobs: 256 MiB, 2,000,000 rows (about
0.6 GB peak while validating a press table), 1000 columns, 256 characters per text value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from schemas.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

MiB = 1 << 20
DATA_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class FileLimits:
    max_bytes: int = 256 * MiB
    max_rows: int = 2_000_000
    max_columns: int = 1000
    max_text: int = 256

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FileLimits:
        env = os.environ if environ is None else environ
        default = cls()
        return cls(
            max_bytes=_positive_int(env, "GREYLAB_MAX_FILE_BYTES", default.max_bytes),
            max_rows=_positive_int(env, "GREYLAB_MAX_FILE_ROWS", default.max_rows),
        )


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(float(raw))
    except ValueError:
        value = 0
    if value <= 0:
        raise DataError(f"environment variable {name}={raw[:40]!r}: expected a positive integer")
    return value


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


def check_size(path: Path, limits: FileLimits, source: str) -> int:
    """The file's size; `DataError` if it is empty or above `limits.max_bytes` (no read)."""
    size = path.stat().st_size
    if size == 0:
        raise DataError(f"{source}: the file is empty")
    if size > limits.max_bytes:
        raise DataError(
            f"{source}: {_mib(size)}, above the limit of {_mib(limits.max_bytes)} per file "
            "(GREYLAB_MAX_FILE_BYTES); split the file or raise the limit"
        )
    return size


def _kind(path: Path, source: str) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in {".parquet", ".pq"}:
        return "parquet"
    raise DataError(f"{source}: unknown file type '{suffix}' (expected .csv or .parquet)")


def _too_many_rows(source: str, rows: str, limits: FileLimits) -> DataError:
    return DataError(
        f"{source}: {rows} rows, above the limit of {limits.max_rows} rows per file "
        "(GREYLAB_MAX_FILE_ROWS); split the file or raise the limit"
    )


def table_columns(path: Path, limits: FileLimits, *, source: str | None = None) -> list[str]:
    """Column names (CSV header or Parquet schema) after the size, column and (Parquet) row
    checks; nothing but the header or the metadata is read."""
    import pandas as pd
    import pyarrow.parquet as pq

    source = source or str(path)
    kind = _kind(path, source)
    check_size(path, limits, source)
    try:
        if kind == "csv":
            columns = [str(c) for c in pd.read_csv(path, nrows=0).columns]
        else:
            meta = pq.ParquetFile(path)
            columns = [str(c) for c in meta.schema_arrow.names]
            if meta.metadata.num_rows > limits.max_rows:
                raise _too_many_rows(source, str(meta.metadata.num_rows), limits)
    except DataError:
        raise
    except pd.errors.EmptyDataError:
        raise DataError(f"{source}: the file has no header and no rows") from None
    except Exception as exc:  # parser errors of pandas/pyarrow: report, don't crash
        raise DataError(f"{source}: cannot be read as {kind}: {str(exc)[:300]}") from None
    if len(columns) > limits.max_columns:
        raise DataError(
            f"{source}: {len(columns)} columns, above the limit of {limits.max_columns}"
        )
    return columns


def read_limited(
    path: str | Path,
    limits: FileLimits | None = None,
    *,
    columns: Sequence[str] | None = None,
    source: str | None = None,
) -> pd.DataFrame:
    """Read a CSV or Parquet file within `limits` (only `columns`, if given); unreadable,
    empty or too large files raise `DataError` naming `source` (default: the path)."""
    import pandas as pd
    import pyarrow.parquet as pq

    path = Path(path)
    source = source or str(path)
    limits = limits or FileLimits.from_env()
    if not path.exists():
        raise DataError(f"{source}: file not found")
    if not path.is_file():
        raise DataError(f"{source}: not a regular file")
    present = table_columns(path, limits, source=source)
    wanted = [c for c in columns if c in present] if columns is not None else None
    kind = _kind(path, source)
    try:
        if kind == "csv":
            frame = pd.read_csv(path, usecols=wanted, nrows=limits.max_rows + 1)
            if len(frame) > limits.max_rows:
                raise _too_many_rows(source, f"more than {limits.max_rows}", limits)
        else:
            import pyarrow as pa

            schema = pq.ParquetFile(path).schema_arrow
            text = [
                f.name
                for f in schema
                if (wanted is None or f.name in wanted)
                and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
            ]
            table = pq.read_table(path, columns=wanted, read_dictionary=text)
            for name in text:
                _check_text(table.column(name), name, limits, source)
            frame = table.to_pandas()
            for name in text:
                frame[name] = frame[name].astype(object)
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{source}: cannot be read as {kind}: {str(exc)[:300]}") from None
    if frame.empty:
        raise DataError(f"{source}: the file has a header but no data rows")
    return frame


def _check_text(column: object, name: str, limits: FileLimits, source: str) -> None:
    """Dictionary-encoded text: the distinct values' lengths, before expanding them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for chunk in column.chunks:  # type: ignore[attr-defined]
        values = chunk.dictionary if pa.types.is_dictionary(chunk.type) else chunk
        if len(values) and pc.max(pc.utf8_length(values)).as_py() > limits.max_text:
            raise DataError(
                f"{source}: column '{name}' has a value longer than {limits.max_text} characters"
            )

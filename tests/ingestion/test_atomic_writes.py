"""The one atomic writer (`schemas.storage`) that every ingestion write goes through, and the
small pure pieces of the layout and the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ingestion.layout import error_report_path, free_name, part_path
from ingestion.results import neutralise_formulas
from schemas.storage import write_atomic, write_parquet_atomic, write_text_atomic


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = write_text_atomic("old\n", tmp_path / "sub" / "report.txt")
    assert target.read_text() == "old\n"

    def half_then_fail(handle) -> None:
        handle.write(b"new, half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, half_then_fail)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.txt"]


def test_parquet_and_text_are_replaced_whole(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1, 2, 3]})
    path = write_parquet_atomic(frame, tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(path), frame)
    write_parquet_atomic(frame.iloc[:1], path)
    assert len(pd.read_parquet(path)) == 1
    text = write_text_atomic("é\n", tmp_path / "x.txt")
    assert text.read_bytes() == "é\n".encode()
    assert not list(tmp_path.glob(".*"))


def test_free_name_skips_taken_files_and_taken_error_reports(tmp_path: Path) -> None:
    sha = "ab" * 32
    first = free_name(tmp_path, "x.csv", sha)
    assert first == tmp_path / "x.csv"
    error_report_path(first).write_text("taken")  # only the report exists: still taken
    second = free_name(tmp_path, "x.csv", sha)
    assert second == tmp_path / f"x-{sha[:12]}.csv"
    second.write_text("taken")
    assert free_name(tmp_path, "x.csv", sha) == tmp_path / f"x-{sha[:12]}-1.csv"
    assert free_name(tmp_path, "noext", sha) == tmp_path / "noext"


def test_part_path_is_hive_partitioned_by_study_and_campaign(tmp_path: Path) -> None:
    path = part_path(tmp_path, "press", "line-1", "f" * 64)
    assert path.relative_to(tmp_path).parts == (
        "datasets",
        "study=press",
        "campaign=line-1",
        f"part-{'f' * 64}.parquet",
    )


def test_neutralise_formulas_prefixes_only_text_that_a_spreadsheet_would_run() -> None:
    frame = pd.DataFrame({"name": ["=cmd", "+1", "ok", "-x", "@a", "\tt"], "rows": range(6)})
    out = neutralise_formulas(frame)
    assert list(out["name"]) == ["'=cmd", "'+1", "ok", "'-x", "'@a", "'\tt"]
    assert list(out["rows"]) == list(range(6))
    assert frame["name"].iloc[0] == "=cmd"  # the input is not changed

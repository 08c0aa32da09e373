"""Outputs never replace a file silently (issue 28, item 7): `--out`, the sensor sheet and
`--figure` refuse an existing file with exit 2 unless `--overwrite`, before any work or
tracking; files are written atomically with readable modes (0666 minus the umask, not the
temporary file's 0600); an unsupported figure type is refused before a run is tracked."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from flows.cli import main
from tests.hostile.test_products_hostile import product  # noqa: F401 - a fixture

OLD = "kept,content\n1,2\n"


@pytest.fixture(autouse=True)
def umask_022(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/m.db")
    monkeypatch.chdir(tmp_path)
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_press_simulate_refuses_an_existing_table_and_sheet(tmp_path: Path, capsys) -> None:
    out = tmp_path / "lab.csv"
    out.write_text(OLD)
    assert main(["press", "simulate", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err and out.read_text() == OLD
    assert not (tmp_path / "lab.sensors.csv").exists()
    # the sheet exists, the table not: neither is written
    out.unlink()
    (tmp_path / "lab.sensors.csv").write_text(OLD)
    assert main(["press", "simulate", "--out", str(out)]) == 2
    assert "--sheet" in capsys.readouterr().err and not out.exists()
    assert (tmp_path / "lab.sensors.csv").read_text() == OLD


def test_overwrite_replaces_both_with_readable_modes(tmp_path: Path) -> None:
    out, sheet = tmp_path / "lab.csv", tmp_path / "lab.sensors.csv"
    out.write_text(OLD)
    sheet.write_text(OLD)
    assert main(["press", "simulate", "--out", str(out), "--overwrite"]) == 0
    assert len(pd.read_csv(out)) > 0 and "sigma_um" in pd.read_csv(sheet).columns
    assert _mode(out) == 0o644 and _mode(sheet) == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_new_files_are_readable(tmp_path: Path) -> None:
    assert main(["press", "simulate", "--out", str(tmp_path / "new.parquet"),
                 "--sheet", str(tmp_path / "sheet.csv")]) == 0  # fmt: skip
    assert _mode(tmp_path / "new.parquet") == 0o644 and _mode(tmp_path / "sheet.csv") == 0o644


def test_drive_and_inverse_outputs_are_not_replaced(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rec.csv"
    out.write_text(OLD)
    assert main(["drive", "simulate", "--out", str(out)]) == 2
    assert out.read_text() == OLD
    table = tmp_path / "motion.parquet"
    table.write_text(OLD)
    assert main(["inverse", "run", "two_mass", "--no-track", "--out", str(table)]) == 2
    assert "--overwrite" in capsys.readouterr().err and table.read_text() == OLD
    assert main(["drive", "simulate", "--out", str(out), "--overwrite"]) == 0
    assert "torque_Nm" in pd.read_csv(out).columns and _mode(out) == 0o644


def test_a_figure_of_an_unsupported_type_is_refused_before_tracking(
    product: dict,  # noqa: F811 - the fixture
    tmp_path: Path,
    capsys,
) -> None:
    argv = ["press", "validate", "--model", str(product["model"]), "--data",
            str(product["data"])]  # fmt: skip
    assert main([*argv, "--figure", str(tmp_path / "x.txt")]) == 2
    assert "unsupported file type '.txt'" in capsys.readouterr().err
    assert not (tmp_path / "m.db").exists()  # no run was tracked (no store was even opened)
    figure = tmp_path / "fig.png"
    figure.write_text(OLD)
    assert main([*argv, "--no-track", "--figure", str(figure)]) == 2
    assert figure.read_text() == OLD
    assert main([*argv, "--no-track", "--figure", str(figure), "--overwrite"]) == 0
    assert figure.read_bytes().startswith(b"\x89PNG") and _mode(figure) == 0o644


def test_design_and_compare_figures(tmp_path: Path, capsys) -> None:
    figure = tmp_path / "design.png"
    figure.write_text(OLD)
    assert main(["press", "design", "--figure", str(figure)]) == 2
    assert figure.read_text() == OLD
    assert main(["press", "design", "--figure", str(tmp_path / "design.txt")]) == 2
    assert main(["compare", "--study", "press", "--figure", str(tmp_path / "c.txt")]) == 2
    assert capsys.readouterr().err.count("unsupported file type") == 2


def test_a_file_created_while_writing_is_not_replaced(tmp_path: Path, monkeypatch) -> None:
    """The no-overwrite write links the finished file into place: a file that appeared after
    the check (another writer) is kept, the write fails (exit 2 at the command line)."""
    from flows import cli_common
    from flows.cli_common import write_table
    from methods.errors import InputError

    out = tmp_path / "racing.csv"
    out.write_text(OLD)  # as if written by another process after the check passed
    monkeypatch.setattr(cli_common, "check_output", lambda path, **_: path)
    with pytest.raises(InputError, match="exists"):
        write_table(pd.DataFrame({"a": [1]}), out)
    assert out.read_text() == OLD
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_file_system_without_hard_links_still_never_replaces(tmp_path: Path, monkeypatch) -> None:
    from schemas import storage

    def no_links(source: str, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(storage.os, "link", no_links)
    new = tmp_path / "new.txt"
    storage.write_atomic(new, lambda h: h.write(b"new"), readable=True, replace=False)
    assert new.read_bytes() == b"new" and _mode(new) == 0o644
    with pytest.raises(FileExistsError):
        storage.write_atomic(new, lambda h: h.write(b"other"), replace=False)
    assert new.read_bytes() == b"new"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

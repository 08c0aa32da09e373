"""The command line on bad press input: a clear message, exit code 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from tests.schemas.test_press_schema import good_table


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _csv(tmp_path: Path, frame: pd.DataFrame, name: str = "lab.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BAD_TABLES = {
    "missing-column": (lambda f: f.drop(columns=["sensor"]), "missing column(s) ['sensor']"),
    "nan": (lambda f: f.assign(force_N=f["force_N"].where(f.index != 4)), "not_nullable"),
    "inf": (
        lambda f: f.assign(displacement_um=f["displacement_um"].where(f.index != 4, np.inf)),
        "failed finite",
    ),
    "duplicate-key": (lambda f: pd.concat([f, f.iloc[[1]]]), "duplicate key"),
    "negative-force": (
        lambda f: f.assign(force_N=f["force_N"].where(f.index != 2, -1.0)),
        "greater_than_or_equal_to(0)",
    ),
    "missing-step": (
        lambda f: f[~((f["series"] == 1) & (f["step"] == 2))],
        "series 1 lacks step(s) [2]",
    ),
    "missing-sensor": (lambda f: f.drop(index=[3]), "lacks step 1/sensor 'b'"),
    "text-in-number": (
        lambda f: f.astype({"displacement_um": object}).assign(
            displacement_um=lambda g: g["displacement_um"].where(g.index != 6, "12..5")
        ),
        "coerce_dtype('float64') (value: '12..5')",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_TABLES))
def test_bad_table_exits_2_with_message(kind: str, tmp_path: Path, capsys) -> None:
    mutate, expected = BAD_TABLES[kind]
    path = _csv(tmp_path, mutate(good_table()))
    code, out, err = _run(capsys, "press", "check", "--data", str(path))
    assert code == 2
    assert expected in err and str(path) in err
    assert "Traceback" not in err + out


def test_empty_file_and_unknown_sheet_sensor(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code, _, err = _run(capsys, "press", "check", "--data", str(empty))
    assert code == 2 and "the file is empty" in err

    sheet = _csv(tmp_path, pd.DataFrame({"sensor": ["a", "zz"], "sigma_um": [1.0, 1.0]}), "s.csv")
    data = _csv(tmp_path, good_table())
    code, _, err = _run(capsys, "press", "check", "--data", str(data), "--sheet", str(sheet))
    assert code == 2 and "unknown sensor(s) ['zz']" in err


def test_fewer_than_three_series_for_normality(tmp_path: Path, capsys) -> None:
    data = _csv(tmp_path, good_table(n_series=2))
    code, _, err = _run(capsys, "press", "check", "--data", str(data))
    assert code == 2 and "at least 3 measurement series, the table has 2" in err


def test_console_entry_point_exit_code_and_no_traceback(tmp_path: Path) -> None:
    path = _csv(tmp_path, good_table().drop(columns=["force_N"]))
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "press", "check", "--data", str(path)],
        capture_output=True, text=True, timeout=120,
        env={"GREYLAB_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "missing column(s) ['force_N']" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_option_value_is_bad_input(tmp_path: Path, capsys) -> None:
    code, _, err = _run(capsys, "press", "simulate", "--out", str(tmp_path / "x.csv"),
                        "--truth", "M9")  # fmt: skip
    assert code == 2 and "--truth must be M1, M2 or M3" in err

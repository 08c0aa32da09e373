"""Hostile or careless use of the CLI (issue 10): usage errors exit 2 (typer's own click),
abusive sizes are refused before anything is allocated, YAML alias bombs give a short error,
rich markup in file content prints literally, error messages stay short."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from flows.cli import main
from flows.cli_common import MAX_MESSAGE, clip, frame_table, stdout, table

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- exit-code contract: one test per class of usage error ------------------------------------
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["press", "detect", "--tests", "abc"], "--tests"),  # bad value
        (["press", "detect", "--no-such-option"], "--no-such-option"),  # unknown option
        (["press", "simulate"], "--out"),  # missing option
        (["no-such-command"], "no-such-command"),  # unknown command
        (["inverse", "run", "two_mass", "--dt", "fast"], "--dt"),  # bad value, other study
    ],
    ids=["bad-value", "unknown-option", "missing-option", "unknown-command", "bad-float"],
)
def test_usage_errors_exit_2_without_internal_error(capsys, argv, needle) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2, err
    assert "internal error" not in err
    assert needle in err


def test_unknown_runner_exits_2_naming_the_choices(capsys) -> None:
    code, _, err = _run(
        capsys, "drive", "identify", "--runner", "bogus", "--population", "2", "--generations", "1"
    )
    assert code == 2, err
    assert "--runner must be one of thread, dask" in err and "bogus" in err


# -- limits ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["--t-end", "3e4"],  # 3e7 steps: a MemoryError before the limit existed
        ["--t-end", "1e9"],
        ["--t-end", "10", "--dt", "1e-9"],
    ],
)
def test_inverse_steps_beyond_the_limit_are_refused_before_allocating(capsys, argv) -> None:
    start = time.perf_counter()
    code, _, err = _run(capsys, "inverse", "run", "two_mass", "--no-track", *argv)
    assert code == 2, err
    assert "exceeds the limit" in err and "GREYLAB_MAX_INVERSE_STEPS" in err
    assert time.perf_counter() - start < 30  # refused, not computed


def test_the_steps_limit_is_configurable(capsys, monkeypatch) -> None:
    monkeypatch.setenv("GREYLAB_MAX_INVERSE_STEPS", "100")
    code, _, err = _run(capsys, "inverse", "run", "two_mass", "--no-track", "--t-end", "1")
    assert code == 2 and "limit of 100" in err


def test_memory_error_exits_2_with_a_message(capsys, monkeypatch) -> None:
    # A MemoryError cannot be caused safely on a shared machine: raise one from the command.
    import flows.inverse.cli as cli_inverse

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(cli_inverse, "_run_untracked", exhausted)
    code, _, err = _run(capsys, "inverse", "run", "two_mass", "--no-track", "--t-end", "1")
    assert code == 2 and "out of memory" in err and "internal error" not in err


def test_flow_settings_refuse_abusive_sizes(monkeypatch) -> None:
    from flows.drive.flow import DriveSearch
    from flows.inverse.flow import InverseStudy
    from flows.press.flow import PressStudy

    with pytest.raises(ValidationError, match="GREYLAB_MAX_INVERSE_STEPS"):
        InverseStudy(t_end=1e9)
    with pytest.raises(ValidationError, match="GREYLAB_MAX_INVERSE_STEPS"):
        InverseStudy(dt=1e-9, t_end=10.0)
    with pytest.raises(ValidationError, match="GREYLAB_MAX_INVERSE_STEPS"):
        InverseStudy(demand={"t_end": 1e9, "outputs": {}})
    with pytest.raises(ValidationError, match="GREYLAB_MAX_INVERSE_RUNS"):
        InverseStudy(dts=[1e-3 * (1 + i) for i in range(60)], t_end=1.0)
    with pytest.raises(ValidationError, match="GREYLAB_MAX_POPULATION"):
        DriveSearch(population=1_000_000)
    with pytest.raises(ValidationError, match="GREYLAB_MAX_GP_EVALUATIONS"):
        DriveSearch(population=100, generations=1000)
    with pytest.raises(ValidationError, match="GREYLAB_MAX_WORKERS"):
        DriveSearch(workers=10_000)
    with pytest.raises(ValidationError, match="GREYLAB_MAX_TESTS"):
        PressStudy(n_tests=100_000)
    InverseStudy(t_end=12.0)  # the defaults pass
    DriveSearch()
    PressStudy()
    monkeypatch.setenv("GREYLAB_MAX_POPULATION", "2000000")
    monkeypatch.setenv("GREYLAB_MAX_GP_EVALUATIONS", "2000000")
    DriveSearch(population=1_000_000, generations=1)  # configurable on the machine


def test_cli_refuses_too_many_workers(capsys) -> None:
    code, _, err = _run(capsys, "press", "detect", "--workers", "100000", "--tests", "1")
    assert code == 2 and "GREYLAB_MAX_WORKERS" in err


# -- YAML bombs -----------------------------------------------------------------------------------
def _bomb(levels: int, width: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bombs_give_a_short_error_fast(tmp_path: Path) -> None:
    # ~400 and ~500 bytes; without the alias ban the second one hangs the CLI (10^10 strings)
    for levels, width in [(9, 9), (10, 10)]:
        text = _bomb(levels, width)
        assert len(text) < 600
        path = tmp_path / f"bomb{levels}.yaml"
        path.write_text(text)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "flows.cli", "inverse", "run", "two_mass", "--no-track",
             "--demand", str(path)],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**__import__("os").environ, "GREYLAB_HOME": str(tmp_path / "home")},
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr[-500:]
        assert "aliases" in proc.stderr and len(proc.stderr) < 600
        assert time.perf_counter() - start < 100


def test_demand_files_are_size_limited(tmp_path: Path, capsys) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("t_end: 1.0\n" + "# padding\n" * 30_000)
    code, _, err = _run(capsys, "inverse", "run", "two_mass", "--no-track", "--demand", str(path))
    assert code == 2 and "larger than a demand file may be" in err


# -- markup and message length --------------------------------------------------------------------
def test_markup_in_names_prints_literally(capsys) -> None:
    import pandas as pd

    stdout.print(table("[/x] title", ["[/x]", "[bold]"], [["[/y]", 1.0]]))
    stdout.print(frame_table("t", pd.DataFrame({"sensor": ["[/x]", "[red]"]})))
    stdout.print("file [/x] quarantined")
    out = capsys.readouterr().out
    assert "[/x]" in out and "[/y]" in out and "[red]" in out and "[bold]" in out


def test_press_check_with_a_markup_sensor_name(tmp_path: Path, capsys) -> None:
    from models.press import simulate_press

    frame, _ = simulate_press(truth="M3", seed=1)
    frame["sensor"] = frame["sensor"].replace({"D_vertical": "[/x]"})
    data = tmp_path / "lab.csv"
    frame.to_csv(data, index=False)
    code, out, err = _run(capsys, "press", "check", "--data", str(data))
    assert code == 0, err
    assert "[/x]" in out


def test_error_messages_are_cut(capsys) -> None:
    code, _, err = _run(capsys, "inverse", "run", "x" * 100_000, "--no-track")
    assert code == 2  # system names are refused beyond 200 characters, quoted short (issue 30)
    assert len(err) < MAX_MESSAGE + 200 and "at most 200 characters" in err
    code, _, err = _run(capsys, "inverse", "run", "two_mass", "--demand", "y" * 100_000)
    assert code == 2 and len(err) < MAX_MESSAGE + 200 and "characters cut" in err
    assert len(clip("y" * 10_000, 300)) < 400


def test_demand_sizes_are_bounded() -> None:
    from methods.dae.demand import MAX_ITEMS, parse_demand
    from methods.errors import InputError

    step = {"type": "step", "start": 0, "end": 1, "t0": 0, "t1": 1}
    with pytest.raises(InputError, match="degree: at most"):
        parse_demand({"outputs": {"x": {**step, "degree": 10**9 + 1}}})
    moves = [{"to": 1.0, "t0": i, "t1": i + 0.5} for i in range(MAX_ITEMS + 1)]
    with pytest.raises(InputError, match="at most 1000"):
        parse_demand({"outputs": {"x": {"type": "steps", "start": 0, "moves": moves}}})
    parse_demand({"outputs": {"x": {**step, "degree": 41}}})  # a long chain's degree passes

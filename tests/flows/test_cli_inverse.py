"""`greylab inverse …` in-process (untracked): listing, a run against the exact flat solution,
and bad input — a clear message naming the file/field/time, exit code 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from models.underactuated import exact_solution, get_system


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _yaml(tmp_path: Path, text: str, name: str = "demand.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# a short two-mass demand (degree 9 = C^4, what the force needs); 2 s keep the test fast
TWO_MASS_DEMAND = """
t_end: 2.0
outputs:
  x2: {type: step, start: 0.0, end: 0.5, t0: 0.2, t1: 1.5, degree: 9}
"""


def test_list_shows_systems_parameters_and_units(capsys) -> None:
    code, out, _ = _run(capsys, "inverse", "list", "--json")
    assert code == 0
    systems = {s["name"]: s for s in json.loads(out)["systems"]}
    assert {"two_mass", "chain", "planar_crane", "trolley_crane", "ship"} <= set(systems)
    crane = systems["planar_crane"]
    assert crane["outputs"] == ["x", "z"] and crane["controls"] == ["F", "M_w"]
    assert crane["has_exact_solution"]
    params = {p["name"]: p for p in crane["parameters"]}
    assert params["m"]["unit"] == "kg" and params["m"]["value"] == 5.0

    code, out, _ = _run(capsys, "inverse", "list")
    assert code == 0 and "planar_crane" in out and "m_t" in out and "kg m^2" in out


def test_run_two_mass_writes_the_table_and_matches_the_exact_solution(
    tmp_path: Path, capsys
) -> None:
    demand = _yaml(tmp_path, TWO_MASS_DEMAND)
    out_file = tmp_path / "x.parquet"
    code, out, err = _run(
        capsys, "inverse", "run", "two_mass", "--demand", str(demand), "--method", "bdf2",
        "--dt", "2e-3", "--set", "m2=3", "--no-track", "--out", str(out_file), "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    table = pd.read_parquet(out_file)
    assert list(table.columns) == ["t_s", "x1", "x2", "v_x1", "v_x2", "F"]
    assert table["t_s"].iloc[-1] == pytest.approx(2.0) and len(table) == 1001
    assert summary["parameters"]["m2"] == 3.0 and summary["overrides"] == {"m2": 3.0}
    assert summary["max_constraint_violation"] <= 1e-8
    assert summary["rank_info"]["ok"]

    system = get_system("two_mass", {"m2": 3.0})
    import yaml

    exact = exact_solution(system, yaml.safe_load(TWO_MASS_DEMAND), table["t_s"].to_numpy())
    # positions are algebraic in the index-3 form: exact to Newton tolerance
    assert np.max(np.abs(exact["x1"] - table["x1"])) < 1e-8
    # the force needs the demand's 4th derivative, which a degree-9 step has only as C^0 (kinks
    # at t0, t1): there BDF2 is O(h) in the controls, measured ~ 38 h max|F| (0.075 N of 7.9 N
    # at h = 2e-3); 2 % of max|F| leaves a margin of ~2.5
    f_max = float(np.max(np.abs(exact["F"])))
    assert np.max(np.abs(exact["F"] - table["F"])) < 0.02 * f_max
    assert summary["error_vs_exact"] == pytest.approx(
        float(np.max(np.abs(exact["F"] - table["F"]))), rel=1e-6
    )  # the largest column error is the force's
    assert summary["tracking_error"] < 1e-4


def test_human_summary_names_the_checks(tmp_path: Path, capsys) -> None:
    demand = _yaml(tmp_path, TWO_MASS_DEMAND)
    code, out, _ = _run(
        capsys, "inverse", "run", "two_mass", "--demand", str(demand), "--dt", "5e-3",
        "--no-track",
    )  # fmt: skip
    assert code == 0
    for text in ("rank([C;B])", "servo-constraint violation", "forward-check", "wall time"):
        assert text in out


BAD_DEMANDS = {
    "yaml-syntax": (
        "t_end: 2.0\noutputs:\n  x2: {type: step, start: 0\n",
        "not valid YAML at line",
    ),
    "unknown-output": (
        "t_end: 2\noutputs:\n  x9: {type: constant, value: 0}\n",
        "missing ['x2'], unknown ['x9']",
    ),
    "missing-field": (
        "t_end: 2\noutputs:\n  x2: {type: step, start: 0, end: 1, t0: 0.2}\n",
        "demand.outputs.x2: missing key 't1'",
    ),
    "unknown-type": (
        "t_end: 2\noutputs:\n  x2: {type: ramp, start: 0}\n",
        "demand.outputs.x2.type: must be one of",
    ),
    "not-a-mapping": ("- 1\n- 2\n", "expected a mapping"),
    "empty": ("", "the file is empty"),
    "no-horizon": (
        "outputs:\n  x2: {type: step, start: 0, end: 1, t0: 0.2, t1: 1.5}\n",
        "no t_end",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_DEMANDS))
def test_bad_demand_file_exits_2_naming_file_and_field(kind: str, tmp_path: Path, capsys) -> None:
    text, expected = BAD_DEMANDS[kind]
    path = _yaml(tmp_path, text, f"{kind}.yaml")
    code, out, err = _run(capsys, "inverse", "run", "two_mass", "--demand", str(path), "--no-track")
    assert code == 2, err
    assert expected in err and str(path) in err
    assert "Traceback" not in err + out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inverse", "run", "gantry"], "unknown system 'gantry'"),
        (["inverse", "run", "two_mass", "--set", "mass=2"], "unknown parameter 'mass'"),
        (["inverse", "run", "two_mass", "--set", "m1=-1"], "two_mass.m1: must be a finite"),
        (["inverse", "run", "two_mass", "--set", "m1"], "--set expects name=value"),
        (["inverse", "run", "two_mass", "--method", "rk4"], "'euler', 'bdf2', 'radau'"),
        (["inverse", "run", "two_mass", "--dt", "0"], "--dt: Input should be greater than 0"),
        (["inverse", "run", "two_mass", "--t-end", "-1"], "--t-end: Input should be greater"),
        (["inverse", "run", "two_mass", "--t-end", "inf"], "--t-end: Input should be a finite"),
        (["inverse", "run", "two_mass", "--demand", "nope.yaml"], "nope.yaml: no such file"),
        (["inverse", "run", "two_mass", "--out", "x.txt"], "use a .parquet"),
    ],
)
def test_unknown_names_and_bad_options_exit_2(argv: list[str], expected: str, capsys) -> None:
    code, out, err = _run(capsys, *argv, "--no-track")
    assert code == 2, err
    assert expected in err and "Traceback" not in err + out


def test_too_rough_demand_names_the_time(tmp_path: Path, capsys) -> None:
    # degree 5 is C^2: the force needs the 4th derivative of the demand -> rejected at t0
    path = _yaml(
        tmp_path,
        "t_end: 2\noutputs:\n  x2: {type: step, start: 0, end: 1, t0: 0.7, t1: 1.5, degree: 5}\n",
    )
    code, out, err = _run(capsys, "inverse", "run", "two_mass", "--demand", str(path), "--no-track")
    assert code == 2
    assert "too rough at t = 0.7 s" in err and "Traceback" not in err + out


def test_infeasible_crane_demand_names_the_time(tmp_path: Path, capsys) -> None:
    # the load lifted above the trolley: the rope would have to get a negative length
    path = _yaml(
        tmp_path,
        "t_end: 4\noutputs:\n  x: {type: constant, value: 0}\n"
        "  z: {type: step, start: -2, end: 1, t0: 0.5, t1: 3.5}\n",
    )
    code, out, err = _run(
        capsys, "inverse", "run", "planar_crane", "--demand", str(path), "--dt", "2e-3",
        "--no-track", "--json",
    )  # fmt: skip
    assert code == 2 and out == ""
    assert "infeasible demand" in err and "at t = " in err and "Traceback" not in err


def test_study_settings_and_per_system_overrides() -> None:
    from pydantic import ValidationError

    from flows.inverse.flow import InverseStudy
    from methods.errors import InputError
    from models.underactuated.study import check_study, overrides_for

    systems = ["two_mass", "planar_crane"]
    both = {"planar_crane.m": 6.0, "two_mass.k": 50.0}
    assert overrides_for("planar_crane", both, systems) == {"m": 6.0}
    assert overrides_for("two_mass", both, systems) == {"k": 50.0}
    built = check_study(systems, both, None, None)
    assert built["planar_crane"].params["m"] == 6.0 and built["two_mass"].params["k"] == 50.0
    with pytest.raises(InputError, match="'ship' is not one of the selected systems"):
        check_study(systems, {"ship.U0": 1.0}, None, None)
    with pytest.raises(InputError, match="two_mass: unknown parameter 'm'"):
        check_study(systems, {"m": 6.0}, None, None)  # plain names apply to every system
    with pytest.raises(InputError, match="missing"):
        check_study(
            systems, {}, {"t_end": 3, "outputs": {"x2": {"type": "constant", "value": 0}}}, None
        )

    assert InverseStudy(dts=[2e-3, 1e-3, 2e-3]).step_sizes() == [2e-3, 1e-3]
    with pytest.raises(ValidationError, match="extra"):
        InverseStudy(system="two_mass")
    with pytest.raises(ValidationError):
        InverseStudy(method="rk4")


def test_run_keeps_its_option_names_and_defaults() -> None:
    # users script against these: the options come from InverseStudy now, names and defaults
    # stay those of the hand-written command
    import typer
    from typer.core import TyperArgument, TyperOption

    from flows.cli import build_app

    command = typer.main.get_command(build_app()).commands["inverse"].commands["run"]  # type: ignore[attr-defined]
    options = {o.opts[0]: o for o in command.params if isinstance(o, TyperOption)}
    defaults = {flag: options[flag].default for flag in options}
    assert defaults == {
        "--method": "euler", "--dt": 1e-3, "--t-end": None, "--set": None, "--check": True,
        "--experiment": "inverse-simulation", "--demand": None, "--out": None, "--track": True,
        "--json": False, "--overwrite": False,
    }  # fmt: skip
    assert options["--check"].secondary_opts == ["--no-check"]
    assert options["--track"].secondary_opts == ["--no-track"]
    (argument,) = [p for p in command.params if isinstance(p, TyperArgument)]
    assert argument.name == "system" and argument.required


def test_settings_use_the_core_method_enum() -> None:
    from flows.inverse.settings import InverseStudy
    from methods.dae import Method

    assert InverseStudy.model_fields["method"].annotation is Method
    assert InverseStudy(method="radau").method is Method.RADAU
    assert [m.value for m in Method] == ["euler", "bdf2", "radau"]


def test_no_track_checks_and_solves_one_built_system(monkeypatch, capsys) -> None:
    import models.underactuated.study

    built: list[str] = []

    def counting(name, overrides=None):
        built.append(name)
        return get_system(name, overrides)

    monkeypatch.setattr(models.underactuated.study, "get_system", counting)
    code, out, err = _run(
        capsys, "inverse", "run", "two_mass", "--dt", "5e-3", "--method", "BDF2", "--no-check",
        "--no-track", "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["method"] == "bdf2" and summary["forward_check"] is None
    assert built == ["two_mass"]  # the check's system is the one solved


def test_steps_are_limited_on_the_default_demands_horizon(capsys) -> None:
    # no t_end here: the horizon is the system's default demand, known only once it is built
    code, _, err = _run(capsys, "inverse", "run", "two_mass", "--dt", "1e-9", "--no-track")
    assert code == 2 and "GREYLAB_MAX_INVERSE_STEPS" in err and "Traceback" not in err

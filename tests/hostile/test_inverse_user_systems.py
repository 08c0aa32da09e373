"""A lab's own underactuated system (issue 30) written wrongly: every mistake is exit 2 with one
paragraph naming the attribute (and the time where there is one), no traceback, no output
file left behind; code is chosen by a dashboard only through the worker's allow-list, and a
function named as a system is never called."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from flows.cli import main
from flows.inverse.settings import InverseStudy
from methods.errors import InputError
from models.underactuated import plugins

# the crank hoist of examples/crank_hoist, reduced; each case below replaces one piece
GOOD = """
import casadi as ca
import math

CALLS = []


def factory():
    CALLS.append("factory")
    raise SystemExit("factory was called")


class Hoist:
    name = "hoist"
    description = "crank hoist"
    parameters = {"J": 0.5, "r": 0.5, "k": 2.0e4, "L": 1.0, "m": 10.0, "g": 9.81}
    coordinates = ("phi", "z")
    controls = ("tau",)
    outputs = ("z",)
    nominal = {"phi": 0.0, "z": -1.0}
    default_demand = {"t_end": 1.0, "outputs": {"z": {"type": "step", "start": -1.2,
                      "end": -1.1, "t0": 0.2, "t1": 0.8, "degree": 9}}}

    def kinetic_energy(self, q, v, p):
        return 0.5 * p["J"] * v[0] ** 2 + 0.5 * p["m"] * v[1] ** 2

    def potential_energy(self, q, p):
        e = p["r"] * ca.sin(q[0]) - q[1] - p["L"]
        return 0.5 * p["k"] * e**2 + p["m"] * p["g"] * q[1]

    def input_forces(self, q, u, p):
        return [u[0], 0]

    def output(self, q, p):
        return [q[1]]
"""

CASES = {  # module name: (replace this, by this), words the message must contain
    "singular_mass": (('0.5 * p["J"] * v[0] ** 2 + ', ""),
                      ["kinetic_energy", "mass matrix", "singular", "phi"]),
    "not_reachable": (("return [q[1]]", "return [q[0]]"),
                      ["outputs ['z']", "controls ['tau']", "not reachable", "rank([C;B]) = 1"]),
    "wrong_p": (("return [q[1]]", "return [q[1] + 0.001 * q[0]]"),
                ["not reachable", "p = rank(C M^-1 B^T) = 1", "2m - n = 0", "t = 0 s"]),
    "math_sin": (("ca.sin(q[0])", "math.sin(q[0])"),
                 ["potential_energy cannot be evaluated on CasADi symbols", "not finite"]),
    "python_if": (("        return [q[1]]", "        if q[1] > 0:\n            return [q[0]]\n"
                   "        return [q[1]]"),
                  ["output(q, p) cannot be evaluated on CasADi symbols", "Python if"]),
    "short_forces": (("return [u[0], 0]", "return [u[0]]"),
                     ["input_forces(q, u, p)", "must return 2 values", "coordinate"]),
    "long_output": (("return [q[1]]", "return [q[1], q[0]]"),
                    ["output(q, p)", "must return 1 values", "one per output"]),
    "no_default": (('"g": 9.81}', '"g": None}'), ["parameters['g']", "no default"]),
    "names_only": (("parameters = {", "parameters = ('J', 'r', 'k', 'L', 'm', 'g')\n    _p = {"),
                   ["parameters", "mapping name -> default value", "tuple"]),
    "no_outputs": (('    outputs = ("z",)\n', ""), ["missing attribute(s) ['outputs']"]),
    "no_output_method": (("def output(self", "def out(self"),
                         ["class Hoist has no output method", "not instantiated"]),
    "nonlinear_input": (("return [u[0], 0]", "return [u[0] ** 3, 0]"),
                        ["input_forces", "linear in the controls"]),
    "offset_input": (("return [u[0], 0]", "return [u[0] + 1.0, 0]"),
                     ["input_forces", "vanish for zero controls"]),
    "foreign_symbol": (("return 0.5 * p[", "return 1e-3 * ca.SX.sym('w') + 0.5 * p["),
                       ["kinetic_energy", "uses symbols ['w']"]),
    "fully_actuated": (('controls = ("tau",)', 'controls = ("tau", "F")'),
                       ["outputs", "one demanded output per control"]),
    "raises_in_init": (("    def kinetic_energy", "    def __init__(self):\n"
                        "        raise ValueError('calibration file missing')\n\n"
                        "    def kinetic_energy"), ["constructor Hoist() failed",
                                                    "ValueError: calibration file missing"]),
    "syntax_error": (("class Hoist:", "class Hoist(:"), ["SyntaxError"]),
    "short_exact": (("    def output(self", "    def exact_solution(self, t, y, p):\n"
                     "        return {'tau': [1.0, 2.0]}\n\n    def output(self"),
                    ["exact_solution", "column 'tau' is not", "one per time"]),
    "bad_name": (('coordinates = ("phi", "z")', 'coordinates = ("phi", "z[0]")'),
                 ["coordinates", "'z[0]' is not a name"]),
}  # fmt: skip


@pytest.fixture()
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A lab folder with one module per case (`hostile_<case>.py`), the current folder."""
    for case, ((old, new), _) in CASES.items():
        assert old in GOOD, case
        (tmp_path / f"hostile_{case}.py").write_text(GOOD.replace(old, new))
    (tmp_path / "hostile_good.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv(plugins.ALLOWED_ENV, raising=False)
    monkeypatch.setattr(plugins, "_SESSION_ALLOWED", set())
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [*CASES, "good"]:
        sys.modules.pop(f"hostile_{name}", None)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_system_is_exit_2_naming_the_attribute(lab: Path, capsys, case: str) -> None:
    out = lab / "controls.parquet"
    code, err = _run(capsys, "inverse", "run", f"hostile_{case}.py:Hoist", "--no-track",
                     "--no-check", "--out", str(out))  # fmt: skip
    assert code == 2, err
    for words in CASES[case][1]:
        assert words in err, (case, err)
    assert "Traceback" not in err and "internal error" not in err
    assert err.count("\n") == 1, err  # one paragraph
    assert not out.exists()  # nothing written for a refused system


def test_the_good_system_runs_by_file_and_by_module(lab: Path, capsys) -> None:
    for ref in ("hostile_good.py:Hoist", "hostile_good:Hoist"):
        code, err = _run(capsys, "inverse", "run", ref, "--no-track", "--dt", "5e-3")
        assert code == 0, err


def test_a_function_named_as_a_system_is_never_called(lab: Path, capsys) -> None:
    code, err = _run(capsys, "inverse", "run", "hostile_good:factory", "--no-track")
    assert code == 2 and "is a function, not a system" in err
    assert sys.modules["hostile_good"].CALLS == []
    code, err = _run(capsys, "inverse", "run", "os:abort", "--no-track")
    assert code == 2 and "not a system" in err  # and this process is still alive


def test_a_missing_file_names_the_module(lab: Path, capsys) -> None:
    code, err = _run(capsys, "inverse", "run", "no_such_file.py:Hoist", "--no-track")
    assert code == 2 and "cannot import module 'no_such_file' for system" in err


def test_dashboard_runs_take_only_systems_the_worker_allows(lab: Path, monkeypatch) -> None:
    with pytest.raises(ValidationError, match="GREYLAB_ALLOWED_SYSTEMS"):
        InverseStudy(systems=["hostile_good:Hoist"])
    with pytest.raises(ValidationError, match="not allowed for flow runs"):
        InverseStudy(systems=["os:system"])
    assert "hostile_good" not in sys.modules  # the check imports nothing
    InverseStudy(systems=["two_mass"])  # built-ins need no allow-list
    monkeypatch.setenv(plugins.ALLOWED_ENV, "hostile_good:Hoist")
    assert InverseStudy(systems=["hostile_good.py:Hoist"]).systems == ["hostile_good:Hoist"]
    form = InverseStudy.model_json_schema()["properties"]["systems"]["items"]["enum"]
    assert "hostile_good:Hoist" in form and "two_mass" in form and "os:system" not in form


def test_the_study_check_is_the_second_gate(lab: Path, monkeypatch) -> None:
    from models.underactuated.study import check_study

    monkeypatch.syspath_prepend(str(lab))
    with pytest.raises(InputError, match="not allowed for flow runs"):
        check_study(["hostile_good:Hoist"], {}, None, None, [1e-2])  # settings bypassed
    assert "hostile_good" not in sys.modules
    plugins.allow_systems(["hostile_good:Hoist"])
    built = check_study(["hostile_good:Hoist"], {}, None, None, [1e-2])
    assert built["hostile_good:Hoist"].user_name == "hoist"


def test_overrides_name_the_systems_parameters(lab: Path, capsys) -> None:
    code, err = _run(capsys, "inverse", "run", "hostile_good:Hoist", "--set", "mass=3",
                     "--no-track")  # fmt: skip
    assert code == 2 and "unknown parameter 'mass'" in err and "'m'" in err
    code, err = _run(capsys, "inverse", "run", "hostile_good:Hoist", "--set", "m=inf",
                     "--no-track")  # fmt: skip
    assert code == 2


def test_an_override_that_removes_an_inertia_is_named(lab: Path, capsys) -> None:
    code, err = _run(capsys, "inverse", "run", "hostile_good:Hoist", "--set", "J=0",
                     "--no-track")  # fmt: skip
    assert code == 2 and "kinetic_energy" in err and "singular" in err and "['phi']" in err


def test_long_names_are_refused_and_quoted_short(lab: Path, capsys) -> None:
    with pytest.raises(ValidationError, match="at most 200 characters"):
        InverseStudy(systems=["a" * 5000 + ":B"])
    code, err = _run(capsys, "inverse", "run", "x" * 5000, "--no-track")
    assert code == 2 and "at most 200 characters" in err and len(err) < 1000
    code, err = _run(capsys, "inverse", "run", "x" * 150, "--no-track")
    assert code == 2 and "unknown system" in err


def test_per_system_overrides_name_a_file_reference(lab: Path, capsys) -> None:
    code = main(["inverse", "run", "hostile_good.py:Hoist", "--no-track", "--dt", "5e-3",
                 "--set", "hostile_good.py:Hoist.m=12", "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["parameters"]["m"] == 12.0


def test_a_system_without_default_demand_asks_for_one(lab: Path, capsys) -> None:
    (lab / "hostile_nodemand.py").write_text(GOOD.replace("    default_demand =", "    _d ="))
    try:
        code, err = _run(capsys, "inverse", "run", "hostile_nodemand:Hoist", "--no-track")
    finally:
        sys.modules.pop("hostile_nodemand", None)
    assert code == 2 and "no default_demand" in err and "--demand" in err

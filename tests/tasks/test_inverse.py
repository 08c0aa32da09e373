"""`models.underactuated.study`: the one input check of a study (`check_study`) and the plain computation
(`solve_system`) that the Prefect task `simulate` and `greylab inverse run --no-track` share.
Failures of the input come back as an outcome with the core's message and time, never raised."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from methods.dae import Method
from methods.errors import InputError
from models.underactuated import get_system
from models.underactuated.study import check_study, solve_system
from tasks.inverse.tasks import simulate

TWO_MASS = {
    "t_end": 2.0,
    "outputs": {
        "x2": {"type": "step", "start": 0.0, "end": 0.5, "t0": 0.2, "t1": 1.5, "degree": 9}
    },
}
NO_HORIZON = {"outputs": {"x2": {"type": "step", "start": 0, "end": 1, "t0": 0.2, "t1": 1.5}}}


def test_check_study_names_systems_demand_source_and_horizon() -> None:
    with pytest.raises(InputError, match="select at least one system"):
        check_study([], {}, None, None)
    with pytest.raises(InputError, match=r"\['two_mass'\] selected more than once"):
        check_study(["two_mass", "two_mass"], {}, None, None)
    with pytest.raises(InputError, match=r"^--demand d\.yaml: demand outputs do not match"):
        check_study(["planar_crane"], {}, TWO_MASS, None, source="--demand d.yaml")
    with pytest.raises(InputError, match=r"^two_mass: no t_end in the demand"):
        check_study(["two_mass"], {}, NO_HORIZON, None)
    assert set(check_study(["two_mass"], {}, NO_HORIZON, 2.0)) == {"two_mass"}


def test_check_study_limits_steps_on_each_systems_horizon(monkeypatch) -> None:
    monkeypatch.setenv("GREYLAB_MAX_INVERSE_STEPS", "1000")
    check_study(["two_mass"], {}, TWO_MASS, None, [2e-3])  # 2 s / 2 ms = 1000 steps
    with pytest.raises(InputError, match="limit of 1,000"):
        check_study(["two_mass"], {}, TWO_MASS, None, [2e-3, 1e-3])  # the smallest counts
    with pytest.raises(InputError, match="limit of 1,000"):
        check_study(["two_mass"], {}, None, None, [1e-4])  # the default demand's horizon


def test_the_task_and_the_plain_function_compute_the_same(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GREYLAB_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    plain = solve_system(
        get_system("two_mass", {"m2": 3.0}), TWO_MASS, Method.BDF2, 5e-3,
        overrides={"m2": 3.0},
    )  # fmt: skip
    task = simulate.fn(
        "two_mass", {"two_mass.m2": 3.0}, TWO_MASS, "bdf2", 5e-3, systems=["two_mass", "chain"]
    )
    assert plain.ok and task.ok and plain.table_path is None
    assert plain.overrides == task.overrides == {"m2": 3.0} and task.method == "bdf2"
    assert plain.result is not None and task.result is not None
    pd.testing.assert_frame_equal(plain.result.table, task.result.table)
    stored = pd.read_parquet(str(task.table_path))
    assert Path(str(task.table_path)).is_relative_to(tmp_path / "data" / "inverse" / "tables")
    pd.testing.assert_frame_equal(stored, task.result.table)
    assert plain.error_vs_exact is not None and plain.forward is not None


def test_bad_input_is_an_outcome_not_an_exception() -> None:
    unknown = simulate.fn("gantry", {}, None, "euler", 1e-2, store=False)
    assert not unknown.ok and "unknown system 'gantry'" in str(unknown.error)
    rough = {"t_end": 2, "outputs": {"x2": {"type": "step", "start": 0, "end": 1, "t0": 0.7,
                                            "t1": 1.5, "degree": 5}}}  # fmt: skip
    outcome = solve_system(get_system("two_mass"), rough, "euler", 1e-2)
    assert not outcome.ok and outcome.error_time == pytest.approx(0.7)
    assert outcome.to_dict()["status"] == "failed" and "too rough" in str(outcome.error)

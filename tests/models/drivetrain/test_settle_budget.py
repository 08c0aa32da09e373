"""The substep settling does not begin a raise its identification cannot afford (session 29,
``models.drivetrain.gp.solve._no_raise``): a refit at the raised count needs at least two
simulations there; where those would pass the work limit, or the seconds the compiled
accuracy check measured would pass the time left, the count is kept and the message says
why. On EMPS with the wide boxes three wrong backlash structures spent 121-244 s on two
simulations at 4096 substeps past their 120 s limit.

The machine: the 250 Hz two-mass of ``test_substeps_issue26`` (noise-free, its own
``simulate`` at the step-size rule), which asks for more substeps than the rule's 1 at its
optimum under a white torque; each case is checked against the same settling with the limit out of the way."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from models.drivetrain.gp import solve
from models.drivetrain.gp.objective import Objective
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.simulate import cached_model, get_simulator, simulate

DT = 1e-3
STRUCTURE = ("two_mass", "viscous")
TRUTH = {"J1": 0.01, "J2": 0.01, "c1": 12337.0, "d1": 0.314, "f_v": 0.05}  # 250 Hz, zeta 0.02
IDENT = IdentificationSettings(jit=False, screen_nfev=0, n_starts=1, time_limit_s=600.0)


@pytest.fixture(scope="module")
def recording() -> pd.DataFrame:
    t = np.arange(1001) * DT
    u = np.random.default_rng(3).normal(0.0, 1.0, t.size)  # white: excites the 250 Hz mode
    y = simulate(STRUCTURE, u, DT, TRUTH, nominals=TRUTH)
    q = np.concatenate([[0.0], np.cumsum(0.5 * (y[1:] + y[:-1]) * DT)])
    return pd.DataFrame({"t_s": t, "torque_Nm": u, "velocity_rad_s": y, "position_rad": q})


def fitted(recording: pd.DataFrame) -> Objective:
    """The objective after a fit at one substep from the truth (the settling's starting
    point): 1 substep is the rule's count at the truth, too few for the accuracy check."""
    data = as_arrays(recording)

    def make(n_samples: int, n_sub: int, native: bool = True):
        return get_simulator(STRUCTURE, n_samples, DT, n_sub=n_sub, nominals=TRUTH, jit=False)

    start = cached_model(STRUCTURE, nominals=TRUTH).values(TRUTH)
    objective = Objective(make, make(data.n, 1), data, data.n, IDENT, start, time.perf_counter())
    solve.minimise(objective, [objective.best_z], 20, IDENT, fixed=True)
    assert objective.sim.n_sub == 1
    return objective


def test_free_settling_raises_the_count(recording: pd.DataFrame) -> None:
    """The control: without a limit in the way the end point asks for more than 1."""
    objective = fitted(recording)
    timed_out, message = solve.settle(objective, 20, 0, IDENT)
    assert not timed_out and objective.best_n > 1, message


def test_a_raise_past_the_work_limit_is_not_begun(recording: pd.DataFrame) -> None:
    objective = fitted(recording)
    clock = objective.clock
    # room for one simulation at 2 substeps: any raise's two simulations pass it
    clock.work_limit = clock.work + 1.5 * objective.work_at(2)
    work = clock.work
    timed_out, message = solve.settle(objective, 20, 0, IDENT)
    assert not timed_out and objective.best_n == 1 and objective.sim.n_sub == 1
    assert "substeps kept at 1" in message and "left of its work limit" in message, message
    assert clock.work == work  # the checks are not charged, nothing was refitted


def test_a_raise_past_the_time_left_is_not_begun(recording: pd.DataFrame, monkeypatch) -> None:
    """The accuracy check is timed when it runs compiled (``_heavy``: here forced, the
    machine is small); with the time limit reached by now, the raise is refused by name
    instead of running its first simulation into ``TimeLimitReached``."""
    monkeypatch.setattr(solve, "_heavy", lambda objective, n_sub: True)
    objective = fitted(recording)
    objective.clock.time_limit_s = time.perf_counter() - objective.clock.t0
    timed_out, message = solve.settle(objective, 20, 0, IDENT)
    assert not timed_out and objective.best_n == 1, message
    assert "s left of its time limit" in message, message
    objective = fitted(recording)  # the same with an hour left: raised
    objective.clock.time_limit_s = time.perf_counter() - objective.clock.t0 + 3600.0
    timed_out, message = solve.settle(objective, 20, 0, IDENT)
    assert not timed_out and objective.best_n > 1, message

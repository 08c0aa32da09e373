"""The substep settling does not begin a raise its identification cannot afford (session 29,
``models.drivetrain.gp.solve._unaffordable``): a refit at the raised count charges at least
a residual and a Jacobian there and takes at least two simulations' time; where that would
pass the work limit, or the seconds the compiled accuracy check measured would pass the time
left, the count is kept, the identification counts as timed out and the message says why.
On EMPS with the wide boxes three wrong backlash structures spent 121-244 s on two
simulations at 4096 substeps, past their 120 s limit.

The machine: the 250 Hz two-mass of ``test_substeps_issue26`` (noise-free, its own
``simulate`` at the step-size rule), which asks for more substeps than the rule's 1 at its
optimum under a white torque; the first test is the control, the settling with no limit in
the way."""

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
    """A stop the limit would have made after one simulation, made before it: timed out."""
    objective = fitted(recording)
    clock = objective.clock
    # room for one simulation at 2 substeps: no raise's refit fits
    clock.work_limit = clock.work + 1.5 * objective.work_at(2)
    work = clock.work
    timed_out, message = solve.settle(objective, 20, 0, IDENT)
    assert timed_out and objective.best_n == 1 and objective.sim.n_sub == 1, message
    assert "substeps kept at 1" in message and "work limit" in message, message
    assert clock.work == work  # the checks are not charged, nothing was refitted


def test_a_raise_after_the_time_limit_is_not_begun(recording: pd.DataFrame) -> None:
    """The accuracy check is not charged, so the limit may pass during it (60-120 s on EMPS
    at 4096 substeps): the raise is then refused as timed out, not begun."""
    objective = fitted(recording)
    objective.clock.time_limit_s = time.perf_counter() - objective.clock.t0
    timed_out, message = solve.settle(objective, 20, 0, IDENT)
    assert timed_out and objective.best_n == 1, message
    assert "time limit" in message and "0 s are left" in message, message


def test_the_estimate_is_two_simulations_at_the_new_count(recording: pd.DataFrame) -> None:
    """With 30 s left and a measured second per substep, a raise to 2 substeps (two
    simulations: 4 s) is afforded and one to 16 (32 s) is not; at 0 seconds a substep (the
    check ran interpreted: no estimate) any raise within the limit is."""
    objective = fitted(recording)
    clock = objective.clock
    clock.time_limit_s = time.perf_counter() - clock.t0 + 30.0
    assert solve._unaffordable(objective, 2, 1.0) == ""
    why = solve._unaffordable(objective, 16, 1.0)
    assert why.startswith("time limit") and "needs about 32 s" in why, why
    assert solve._unaffordable(objective, 1024, 0.0) == ""
    n_p = objective.best_z.size  # the work: a residual and a Jacobian (1 + n_p simulations)
    clock.work_limit = clock.work + (2 + n_p) * objective.work_at(16)
    assert solve._unaffordable(objective, 16, 0.0) == ""
    assert solve._unaffordable(objective, 32, 0.0).startswith("work limit")

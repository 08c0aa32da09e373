"""A fit that steps where its simulation diverges (``models.drivetrain.gp.objective``:
``R_CAP``, ``J_CAP``). The substep count is fixed inside a fit, so a step to a stiffer spring
can leave RK4's stability region: the output grows by a factor per sample and stays finite
(1e16 .. 1e256 here) before it overflows. Before the caps (beyond ``R_CAP`` the residual
grows with its logarithm; a Jacobian entry at most ``J_CAP``), scipy's trust-region algebra
overflowed on such a point (``J^T J``; the RuntimeWarnings the EMPS wide runs print)
and ended a fit "converged by xtol" at a cost of 1e281, or raised ``ValueError: array must not
contain infs or NaNs`` out of the identification (nothing catches it: the whole search ended).

The machine: the 250 Hz two-mass of ``test_settle_budget`` at one substep, its spring's box
opened to 5e4 N m/rad (RK4 at 1 ms holds to about 4e4 there: omega dt <= 2.83,
omega^2 = c (1/J1 + 1/J2))."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
import pytest

from models.drivetrain.gp import solve
from models.drivetrain.gp.objective import J_CAP, R_CAP, R_TOP, Objective, capped, capped_slope
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.simulate import cached_model, get_simulator, simulate

DT = 1e-3
STRUCTURE = ("two_mass", "viscous")
TRUTH = {"J1": 0.01, "J2": 0.01, "c1": 12337.0, "d1": 0.314, "f_v": 0.05}
BOUNDS = {"c1": (1e3, 5e4)}
IDENT = IdentificationSettings(jit=False, screen_nfev=0, n_starts=1, time_limit_s=600.0)


@pytest.fixture(scope="module")
def objective() -> Objective:
    t = np.arange(1001) * DT
    u = np.random.default_rng(3).normal(0.0, 1.0, t.size)
    y = simulate(STRUCTURE, u, DT, TRUTH, nominals=TRUTH)
    data = as_arrays(pd.DataFrame({"t_s": t, "torque_Nm": u, "velocity_rad_s": y}))

    def make(n_samples: int, n_sub: int, native: bool = True):
        return get_simulator(STRUCTURE, n_samples, DT, n_sub=n_sub, nominals=TRUTH,
                             bounds=BOUNDS, jit=False)  # fmt: skip

    start = cached_model(STRUCTURE, nominals=TRUTH, bounds=BOUNDS).values(TRUTH)
    return Objective(make, make(data.n, 1), data, data.n, IDENT, start, time.perf_counter())


def at_spring(objective: Objective, z_c1: float) -> np.ndarray:
    z = objective.normalised(objective.parameters(objective.best_z))
    z[[s.name for s in objective.sim.model.specs].index("c1")] = z_c1
    return z


@pytest.mark.parametrize("z_c1", [0.95, 0.97, 0.99])
def test_a_diverged_point_has_a_finite_cost_and_the_jacobian_of_what_the_fit_sees(
    objective, z_c1: float
) -> None:
    """c1 4.1e4 .. 4.8e4: the output reaches 1e16 .. 1e256, finite. The residual the fit sees
    grows with its logarithm beyond ``R_CAP`` (at most ``R_TOP``) and the Jacobian is its
    derivative: central differences of the residual (step 1e-6 in ``z``; their own error,
    measured, at most 6.4e-4 of the largest entry here, 1.1e-8 on a stable point) agree."""
    z = at_spring(objective, z_c1)
    with np.errstate(all="ignore"):
        raw = objective.raw_residual(z, objective.sim)
    assert np.all(np.isfinite(raw)) and np.abs(raw).max() > 1e15  # the case, real
    r, jac = objective.residual(z), objective.jacobian(z)
    assert R_CAP < np.abs(r).max() < R_TOP and np.isfinite(float(r @ r))
    assert np.all(np.isfinite(jac)) and np.abs(jac).max() <= J_CAP
    i, h = 2, 1e-6
    step = np.zeros_like(z)
    step[i] = h
    fd = (objective.residual(z + step) - objective.residual(z - step)) / (2 * h)
    assert np.abs(fd - jac[:, i]).max() < 2e-3 * np.abs(jac[:, i]).max()


def test_a_sample_that_is_not_finite_counts_as_the_largest_finite_one() -> None:
    r = np.array([0.5, -2e3, 1e300, -np.inf, np.nan, np.finfo(float).max])
    c, slope = capped(r), capped_slope(r)
    assert c[0] == 0.5 and slope[0] == 1.0
    assert c[1] == pytest.approx(-R_CAP * (1 + np.log(2))) and slope[1] == pytest.approx(0.5)
    assert c[2] < c[5] == pytest.approx(R_TOP) and c[3] == c[4] == R_TOP
    assert slope[3] == slope[4] == 0.0


def test_the_caps_change_nothing_where_the_simulation_is_stable(objective) -> None:
    z = at_spring(objective, 0.5)
    raw = objective.raw_residual(z, objective.sim)
    np.testing.assert_array_equal(objective.residual(z), raw)
    sim = objective.sim
    _y, jp = sim.simulate_with_jacobian(objective.parameters(z), objective.u, objective.y0)
    jz = objective.keep(jp) * objective.slopes(z) / objective.scale
    np.testing.assert_array_equal(objective.jacobian(z), jz)


@pytest.mark.parametrize("z_c1", [0.95, 0.97, 0.99])
def test_a_fit_from_a_diverged_point_runs_without_overflow(objective, z_c1: float) -> None:
    """The product's path (``solve.minimise`` at the fixed count): no warning, no error, and
    the fit walks the spring back to where the simulation is stable (before: a
    ``ValueError`` from 0.99, a stop at cost 1e281 "converged by xtol" from 0.97)."""
    z = at_spring(objective, z_c1)
    objective.best_cost, objective.best_z = np.inf, z.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve.minimise(objective, [z], 40, IDENT, fixed=True)
    assert objective.best_cost < 1.0  # a relative RSS: below the zero model's
    assert objective.parameters(objective.best_z)[2] < objective.parameters(z)[2]

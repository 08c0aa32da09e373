"""A fit that steps where its simulation diverges (``models.drivetrain.gp.objective``:
``capped``, ``R_CAP``, ``J_CAP``). The substep count is fixed inside a fit, so a step to a
stiffer spring can leave RK4's stability region: the output grows by a factor per sample and
stays finite (1e16 .. 1e256 here) before it overflows. Before the cap (beyond ``R_CAP`` the
residual grows with its logarithm, the Jacobian its derivative), scipy's trust-region algebra
overflowed on such a point (``J^T J``; the RuntimeWarnings the EMPS wide runs printed) and
ended a fit "converged by xtol" at a cost of 1e281, or raised ``ValueError: array must not
contain infs or NaNs`` out of the identification (nothing catches it: the whole search ended).

The machine: the 250 Hz two-mass of ``test_settle_budget`` at one substep, its spring's box
opened to 5e4 N m/rad (RK4 at 1 ms holds to about 4e4 there: omega dt <= 2.83,
omega^2 = c (1/J1 + 1/J2)); each test builds its own objective from the truth."""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from models.drivetrain.gp import solve
from models.drivetrain.gp.objective import J_CAP, R_CAP, R_TOP, Objective, capped, capped_slope
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.gp.signals import integral
from models.drivetrain.simulate import cached_model, get_simulator, simulate

DT = 1e-3
STRUCTURE = ("two_mass", "viscous")
TRUTH = {"J1": 0.01, "J2": 0.01, "c1": 12337.0, "d1": 0.314, "f_v": 0.05}
BOUNDS = {"c1": (1e3, 5e4)}
IDENT = IdentificationSettings(jit=False, screen_nfev=0, n_starts=1, time_limit_s=600.0)
C1 = 2  # the spring's index in the model's parameters (J1, J2, c1, d1, f_v)


def objective(position_weight: float = 0.0) -> Objective:
    """The identification's objective from the truth (velocity, and the position too)."""
    t = np.arange(1001) * DT
    u = np.random.default_rng(3).normal(0.0, 1.0, t.size)
    y = simulate(STRUCTURE, u, DT, TRUTH, nominals=TRUTH)
    q = np.concatenate([[0.0], np.cumsum(0.5 * (y[1:] + y[:-1]) * DT)])
    data = as_arrays(pd.DataFrame({"t_s": t, "torque_Nm": u, "velocity_rad_s": y,
                                   "position_rad": q}))  # fmt: skip

    def make(n_samples: int, n_sub: int, native: bool = True):
        return get_simulator(STRUCTURE, n_samples, DT, n_sub=n_sub, nominals=TRUTH,
                             bounds=BOUNDS, jit=False)  # fmt: skip

    ident = replace(IDENT, position_weight=position_weight)
    start = cached_model(STRUCTURE, nominals=TRUTH, bounds=BOUNDS).values(TRUTH)
    return Objective(make, make(data.n, 1), data, data.n, ident, start, time.perf_counter())


def at_spring(obj: Objective, z_c1: float) -> np.ndarray:
    """The truth with the spring at ``z_c1`` of its box (0.95: 4.1e4, 0.99: 4.8e4 N m/rad)."""
    z = obj.best_z.copy()
    z[C1] = z_c1
    return z


@pytest.mark.parametrize("position_weight", [0.0, 1.0])
@pytest.mark.parametrize("z_c1", [0.95, 0.97, 0.99])
def test_a_diverged_point_has_a_finite_cost_and_the_jacobian_of_what_the_fit_sees(
    z_c1: float, position_weight: float
) -> None:
    """The output reaches 1e16 .. 1e256, finite. The residual the fit sees grows with its
    logarithm beyond ``R_CAP`` (at most ``R_TOP``) and the Jacobian is its derivative: central
    differences of the residual agree, step 1e-9 in ``z`` (measured: at most 2.6e-5 of the
    largest entry; their truncation error falls 100x per decade of the step from 1e-6, where
    it reached 0.5-165x the largest entry with the position appended, to 1e-9)."""
    obj = objective(position_weight)
    z = at_spring(obj, z_c1)
    with np.errstate(all="ignore"):
        raw = obj.raw_residual(z, obj.sim)
    assert np.all(np.isfinite(raw)) and np.abs(raw).max() > 1e15  # the case, real
    r, jac = obj.residual(z), obj.jacobian(z)
    assert r.shape == raw.shape == (1001 * (2 if position_weight else 1),)
    assert R_CAP < np.abs(r).max() < R_TOP and np.isfinite(float(r @ r)) and not obj.fitted()
    assert jac.shape == (r.size, 5) and np.all(np.isfinite(jac))
    h = 1e-9
    step = np.zeros_like(z)
    step[C1] = h
    fd = (obj.residual(z + step) - obj.residual(z - step)) / (2 * h)
    assert np.abs(fd - jac[:, C1]).max() < 2e-4 * np.abs(jac[:, C1]).max()


def test_the_cap_changes_nothing_where_the_simulation_is_stable() -> None:
    """Bit for bit, the position appended: the residual, and the Jacobian as it was built."""
    obj = objective(position_weight=1.0)
    z = at_spring(obj, 0.5)
    np.testing.assert_array_equal(obj.residual(z), obj.raw_residual(z, obj.sim))
    assert obj.fitted()
    _y, jp = obj.sim.simulate_with_jacobian(obj.parameters(z), obj.u, obj.y0)
    before = np.vstack([obj.keep(jp), obj.wq * integral(jp, obj.dt)]) * obj.slopes(z) / obj.scale
    np.testing.assert_array_equal(obj.jacobian(z), before)


def test_a_sample_that_is_not_finite_counts_as_the_largest_finite_one() -> None:
    r = np.array([0.5, -2e3, 1e300, -np.inf, np.nan, np.finfo(float).max])
    c, slope = capped(r), capped_slope(r)
    assert c[0] == 0.5 and slope[0] == 1.0
    assert c[1] == pytest.approx(-R_CAP * (1 + np.log(2))) and slope[1] == pytest.approx(0.5)
    assert c[2] < c[5] == pytest.approx(R_TOP) and c[4] == R_TOP and c[3] == -R_TOP
    assert slope[3] == slope[4] == 0.0


class Steep:
    """The kit's simulator whose sensitivity to the spring is 1e40 times its own (a fault the
    kit's simulations do not make here: their largest entry at the diverged points above is
    about 9e9)."""

    def __init__(self, sim) -> None:
        self.sim = sim

    def __getattr__(self, name: str):
        return getattr(self.sim, name)

    def simulate_with_jacobian(self, p, u, y0):
        y, jp = self.sim.simulate_with_jacobian(p, u, y0)
        jp[:, C1] *= 1e40
        return y, jp


def test_a_jacobian_entry_is_at_most_j_cap() -> None:
    """A sensitivity beyond ``J_CAP`` at a point that does not diverge: clipped, the other
    columns kept bit for bit."""
    obj = objective()
    z = at_spring(obj, 0.5)
    plain = obj.jacobian(z)
    obj.sim = Steep(obj.sim)  # type: ignore[assignment]
    jac = obj.jacobian(z)
    assert np.abs(jac[:, C1]).max() == J_CAP
    np.testing.assert_array_equal(np.delete(jac, C1, axis=1), np.delete(plain, C1, axis=1))


@pytest.mark.parametrize("z_c1", [0.95, 0.97, 0.99])
def test_a_fit_from_a_diverged_point_runs_without_overflow(z_c1: float) -> None:
    """The product's path (``solve.minimise`` at the fixed count, 40 evaluations): no warning,
    no error, and the fit walks the spring back below where it started, to a cost below the
    zero model's (before: a ``ValueError`` from 0.99, a stop at cost 1e281 "converged by
    xtol" from 0.97)."""
    obj = objective()
    z = at_spring(obj, z_c1)
    obj.best_cost, obj.best_z = np.inf, z.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve.minimise(obj, [z], 40, IDENT, fixed=True)
    c1 = obj.parameters(obj.best_z)[C1]
    print(f"from c1 {obj.parameters(z)[C1]:.5g}: c1 {c1:.5g}, cost {obj.best_cost:.3g}")  # -s
    assert obj.fitted() and obj.best_cost < 1.0  # a relative RSS: the zero model's is 1
    assert obj.parameters(obj.best_z)[C1] < obj.parameters(z)[C1]

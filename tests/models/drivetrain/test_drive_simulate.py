"""Simulator against closed-form solutions; the reference recording's contract."""

from __future__ import annotations

import numpy as np
import pytest

from models.drivetrain.excitation import reference_recording
from models.drivetrain.kit import assemble
from models.drivetrain.simulate import compile_simulator, simulate
from models.drivetrain.substeps import substeps


def test_one_mass_viscous_step_response_is_exact():
    # J w' = u - f_v w, w(0) = 0 -> w = u/f_v (1 - exp(-f_v t / J)); RK4 with h f_v/J = 1e-3
    # has local error ~ (h f_v/J)^5 / 120, so 1e-9 relative is a generous tolerance.
    dt, n, J, f_v, u = 1e-3, 500, 0.01, 0.01, 0.5
    t = np.arange(n) * dt
    y = simulate(["one_mass", "viscous"], np.full(n, u), dt, {"J1": J, "f_v": f_v})
    np.testing.assert_allclose(y, u / f_v * (1 - np.exp(-f_v * t / J)), rtol=1e-9, atol=1e-12)


def test_delay_shifts_the_input_by_linear_interpolation():
    dt, n = 1e-3, 300
    u = np.where(np.arange(n) >= 50, 1.0, 0.0)
    y0 = simulate(["one_mass"], u, dt, {"J1": 0.01})
    y1 = simulate(["one_mass", "delay"], u, dt, {"J1": 0.01, "T_d": 0.005})
    np.testing.assert_allclose(y1[5:], y0[:-5], atol=1e-12)  # T_d = 5 samples exactly


@pytest.mark.parametrize("min_substeps, jit", [(1, False), (4, False), (4, True)])
def test_jacobian_matches_central_differences(min_substeps, jit):
    # substeps are a loop over one compiled substep; the delay's sensitivity runs through the
    # substeps' input weights, so n_sub > 1 with a delay is the case that can go wrong
    rng = np.random.default_rng(0)
    model = assemble(["two_mass", "coulomb", "stribeck", "delay", "current_control"])
    sim = compile_simulator(model, 400, 1e-3, min_substeps=min_substeps, jit=jit)
    assert sim.n_sub == max(min_substeps, substeps(model, 1e-3))
    u = np.cumsum(rng.normal(0, 0.2, 400))
    p = model.values({"T_d": 0.0043})
    _, jac = sim.simulate_with_jacobian(p, u)
    for i in range(p.size):
        h = 1e-6 * abs(p[i])
        e = np.zeros(p.size)
        e[i] = h
        fd = (sim.simulate(p + e, u) - sim.simulate(p - e, u)) / (2 * h)
        # central differences are O(h^2) accurate: 1e-5 of the column's scale is loose
        assert np.max(np.abs(jac[:, i] - fd)) <= 1e-5 * np.max(np.abs(fd)) + 1e-9


def test_substeps_are_rk4_on_the_finer_grid():
    # n_sub substeps per sample = RK4 with step dt / n_sub on a grid whose input is the
    # linear interpolation of the samples: the same record simulated at dt / 4 with min 1
    rng = np.random.default_rng(1)
    dt, n, structure = 1e-3, 300, ["two_mass", "coulomb", "viscous", "backlash"]
    model = assemble(structure)
    base = substeps(model, dt)
    u = np.cumsum(rng.normal(0, 0.2, n))
    fine_u = np.interp(np.arange(4 * (n - 1) + 1) / 4, np.arange(n), u)
    coarse = compile_simulator(model, n, dt, min_substeps=4 * base)
    fine = compile_simulator(model, fine_u.size, dt / 4, min_substeps=base)
    assert coarse.n_sub == 4 * fine.n_sub
    p = model.values({})
    np.testing.assert_allclose(coarse.simulate(p, u), fine.simulate(p, fine_u)[::4],
                               rtol=1e-12, atol=1e-12)  # fmt: skip


def test_step_rule_grows_with_friction_stiffness_at_the_point():
    soft = assemble(["one_mass", "coulomb"], f_tanh=1.0)
    stiff = assemble(["one_mass", "coulomb"], f_tanh=1000.0)
    assert substeps(soft, 1e-3) == 1
    # at the nominals rho = f_tanh M_C / J = 1000 * 0.2 / 0.01 = 2e4 -> dt rho / 2 = 10 -> 16
    assert substeps(stiff, 1e-3) == 16
    # at the box's corner (M_C 0.4, J 0.005): 8e4 -> 40 -> 64; a point, not the box, decides
    assert substeps(stiff, 1e-3, p={"J1": 0.005, "M_C": 0.4}) == 64
    assert substeps(stiff, 1e-3, p={"J1": 0.02, "M_C": 0.1}) == 4  # 5e3 -> 2.5 -> 4


def test_reference_recording_columns_noise_and_seed():
    clean = reference_recording()
    assert list(clean.columns) == ["t_s", "torque_Nm", "velocity_rad_s", "position_rad"]
    assert len(clean) == 2001 and clean["t_s"].iloc[-1] == pytest.approx(2.0)
    a = reference_recording(noise=0.1, seed=3)
    b = reference_recording(noise=0.1, seed=3)
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
    resid = a["velocity_rad_s"] - clean["velocity_rad_s"]
    assert resid.std() == pytest.approx(0.1, rel=0.1)  # 2001 samples: std error ~1.6 %

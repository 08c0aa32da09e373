"""The input delay (submodel 11) against an analytic oracle: a delay of a non-integer number
of samples is linear interpolation between samples (models/drivetrain/simulate.py), so a ramp
input, held at its first value before the record starts, is delayed EXACTLY: the delayed
model must reproduce the undelayed model driven by the analytically shifted ramp."""

from __future__ import annotations

import numpy as np
import pytest

from models.drivetrain.product import DriveModel

DT = 1e-3
J1 = 0.01


@pytest.mark.parametrize("shift", [2.5, 3.0, 4.37, 7.9])  # samples: fractional and integral
def test_a_delayed_ramp_is_the_ramp_shifted(shift: float) -> None:
    t = np.arange(400) * DT
    ramp = 0.2 + 3.0 * t  # N m: u(t) for t >= 0, held at u(0) before the record starts
    delayed = DriveModel(structure=("one_mass", "delay"),
                         parameters={"J1": J1, "T_d": shift * DT}, dt=DT)  # fmt: skip
    plain = DriveModel(structure=("one_mass",), parameters={"J1": J1}, dt=DT)
    shifted = 0.2 + 3.0 * np.maximum(t - shift * DT, 0.0)  # analytic u(t - T_d), hold before 0
    v_delayed, q_delayed = delayed.simulate(ramp, jit=False)
    v_oracle, q_oracle = plain.simulate(shifted, jit=False)
    # same RK4 scheme on the same input samples: agreement to rounding of ~1e2-sized sums
    np.testing.assert_allclose(v_delayed, v_oracle, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(q_delayed, q_oracle, rtol=1e-11, atol=1e-12)
    # and the delay is real: without it the velocity differs by about u * T_d / J1 at the end
    v_now, _ = plain.simulate(ramp, jit=False)
    assert abs(v_now[-1] - v_delayed[-1]) > 0.5 * 0.2 * shift * DT / J1


def test_a_sine_is_delayed_within_the_interpolation_error() -> None:
    """Linear interpolation of a smooth input errs by at most dt^2/8 max|u''| per sample; the
    velocity (the integral of u / J1 over the record) by at most that times T / J1."""
    t = np.arange(600) * DT
    omega, shift = 40.0, 3.3
    u = np.sin(omega * t)
    delayed = DriveModel(structure=("one_mass", "delay"),
                         parameters={"J1": J1, "T_d": shift * DT}, dt=DT)  # fmt: skip
    plain = DriveModel(structure=("one_mass",), parameters={"J1": J1}, dt=DT)
    exact = np.where(t >= shift * DT, np.sin(omega * (t - shift * DT)), 0.0)
    exact[t < shift * DT] = u[0]  # held at u(0) = 0 before the record starts
    v_delayed, _ = delayed.simulate(u, jit=False)
    v_exact, _ = plain.simulate(exact, jit=False)
    bound = DT**2 / 8 * omega**2 * t[-1] / J1
    assert np.max(np.abs(v_delayed - v_exact)) <= bound
    assert np.max(np.abs(v_delayed - v_exact)) > 0  # interpolated, not exact, for a sine

"""The paper's excitation and the reference recording.

The torque is ``J_ref * a(t)``: the torque that would move a single rigid mass of inertia
``J_ref`` (default 0.03 kg m^2, the nominal J1 + J2)
along a jerk-limited reversing motion: rest 0.1 s, forward move 0.6 s (jerk 5000 rad/s^3,
acceleration 100 rad/s^2, cruise 8 rad/s for 0.4 s), dwell 0.2 s, the same move backwards,
rest until 2.0 s. Sampled at 1 kHz (2001 samples).

The true drive (friction, elasticity) does not follow that motion exactly: the recording is the
open-loop response of the reference model, output = velocity of inertia 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from methods.errors import InputError
from models.drivetrain.simulate import simulate
from models.drivetrain.submodels import (
    DEFAULT_F_TANH,
    Submodel,
    parse_structure,
    positive_parameters,
)

#: the largest magnitude a drive recording may hold (``schemas.drive.MAX_MAGNITUDE``; not
#: imported from there: the schema module loads pandera, ~0.8 s, and this module is imported
#: by every worker)
MAX_MAGNITUDE = 1e15

REFERENCE_STRUCTURE = ("two_mass", "coulomb", "viscous", "stribeck")


def jerk_limited_acceleration(
    t: np.ndarray,
    *,
    jerk: float = 5000.0,
    accel: float = 100.0,
    t_accel: float = 0.06,
    t_cruise: float = 0.4,
    t_start: float = 0.1,
    t_dwell: float = 0.2,
) -> np.ndarray:
    """Acceleration [rad/s^2] of the reversing motion at times ``t`` [s] (shape of ``t``)."""
    tj = accel / jerk

    def trapezoid(tau: np.ndarray) -> np.ndarray:  # one acceleration pulse starting at 0
        ramp_up = np.clip(tau / tj, 0.0, 1.0)
        ramp_down = np.clip((tau - tj - t_accel) / tj, 0.0, 1.0)
        return accel * (ramp_up - ramp_down)

    pulse = 2 * tj + t_accel
    move = 2 * pulse + t_cruise

    def one_move(tau: np.ndarray) -> np.ndarray:
        return trapezoid(tau) - trapezoid(tau - pulse - t_cruise)

    t = np.asarray(t, dtype=float)
    return one_move(t - t_start) - one_move(t - t_start - move - t_dwell)


def _check_overrides(kinds: Iterable[Submodel], overrides: Mapping[str, float]) -> None:
    """Every true value finite and, for a parameter whose box is positive (all but the gravity
    torque ``M_G``), > 0: a zero or negative inertia, stiffness or friction is named here,
    not reported as a diverged simulation (issue 28)."""
    positive = positive_parameters(tuple(kinds))
    for name, value in overrides.items():
        if not math.isfinite(float(value)) or abs(float(value)) > MAX_MAGNITUDE:
            raise InputError(f"--set {name}={value!r}: a true value must be a finite number "
                             f"of magnitude at most {MAX_MAGNITUDE:g}")  # fmt: skip
        if name in positive and not float(value) > 0:
            raise InputError(f"--set {name}={value!r}: {name} is a physical magnitude and must "
                             "be > 0")  # fmt: skip


def reference_torque(t: np.ndarray, inertia: float = 0.03) -> np.ndarray:
    """Torque [N m] that gives the jerk-limited reversing motion to a single mass [kg m^2]."""
    return inertia * jerk_limited_acceleration(t)


def reference_recording(
    structure: Iterable[str | int | Submodel] | str = REFERENCE_STRUCTURE,
    overrides: Mapping[str, float] | None = None,
    noise: float = 0.0,
    seed: int = 0,
    *,
    dt: float = 1e-3,
    duration: float = 2.0,
    f_tanh: float = DEFAULT_F_TANH,
    inertia: float = 0.03,
) -> pd.DataFrame:
    """Simulated recording (columns ``t_s``, ``torque_Nm``, ``velocity_rad_s``, ``position_rad``).

    ``overrides``: true parameter values (others: nominal). ``noise``: ABSOLUTE standard
    deviation [rad/s] of white Gaussian noise added to the velocity only (1 % of the range is
    ``0.01 * np.ptp(velocity)`` of the noise-free record). ``position_rad`` is the noise-free
    position of inertia 1 (trapezoidal integral of the true velocity).
    """
    kinds = parse_structure(structure)
    if not noise >= 0:
        raise InputError(f"noise must be a standard deviation >= 0, got {noise!r}")
    if not noise <= MAX_MAGNITUDE:
        raise InputError(
            f"noise must be at most {MAX_MAGNITUDE:g} (a recording's limit), got {noise:g}"
        )
    _check_overrides(kinds, overrides or {})
    n = round(duration / dt) + 1
    t = np.arange(n) * dt
    torque = reference_torque(t, inertia=inertia)
    velocity = simulate(kinds, torque, dt, overrides, f_tanh=f_tanh)
    if not np.all(np.isfinite(velocity)):
        raise InputError("the reference simulation diverged; check the overrides")
    position = np.concatenate([[0.0], np.cumsum(0.5 * (velocity[1:] + velocity[:-1]) * dt)])
    rng = np.random.default_rng(seed)
    noisy = velocity + (rng.normal(0.0, noise, n) if noise > 0 else 0.0)
    return pd.DataFrame(
        {"t_s": t, "torque_Nm": torque, "velocity_rad_s": noisy, "position_rad": position}
    )

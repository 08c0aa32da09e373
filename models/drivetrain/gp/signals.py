"""Signal helpers of the identification: the prefilter, the split of the record, the
simulation's initial velocity and the position integral (re-exported by
``models.drivetrain.gp.evaluate``, where they were first defined)."""

from __future__ import annotations

import numpy as np

POSITION_SAMPLES = 7  # a cubic through the position's first samples gives the start velocity


def lowpass(cutoff_hz: float, dt: float):
    """``F(a)``: zero-phase 4th-order Butterworth low-pass along axis 0, or None if off
    (``cutoff_hz <= 0`` or at/above the Nyquist frequency ``0.5 / dt``)."""
    if cutoff_hz <= 0 or cutoff_hz >= 0.5 / dt:
        return None
    from scipy.signal import butter, sosfiltfilt

    sos = butter(4, cutoff_hz, fs=1.0 / dt, output="sos")
    return lambda a: sosfiltfilt(sos, a, axis=0)


def split_index(n: int, test_fraction: float) -> int:
    """Number of head samples used for identification."""
    return n if test_fraction <= 0 else max(2, round(n * (1.0 - test_fraction)))


def initial_velocity(y: np.ndarray, q: np.ndarray | None = None, dt: float = 1.0) -> float:
    """The simulation's initial velocity: the slope at the first sample of a cubic fitted to
    the measured position's first ``POSITION_SAMPLES`` samples when the fit uses the position
    (an encoder's position is nearly exact, and a recording may start in motion: over 2 % of
    the EMPS record the cubic missed its start and the fit ended at 2.5x the RSS), else a
    quadratic fitted to the velocity's first 2 % (5..200 samples), rather than the first
    velocity sample itself,
    whose noise stays in a simulated velocity that nothing damps (a machine without friction
    drifts by it for the whole record, and its position by a ramp; measured: RSS 69x the noise
    floor for a one-mass with gravity at 0.5 % noise, ``benchmarks/drive_recovery.py single``,
    machine 4)."""
    if q is not None and q.size >= POSITION_SAMPLES:
        steps = np.arange(POSITION_SAMPLES, dtype=float)
        return float(np.polynomial.polynomial.polyfit(steps, q[:POSITION_SAMPLES], 3)[1] / dt)
    k = _head(y.size)
    if k < 5:
        return float(y[0])
    return float(np.polynomial.polynomial.polyfit(np.arange(k, dtype=float), y[:k], 2)[0])


def _head(n: int) -> int:
    """Samples of the velocity's quadratic in :func:`initial_velocity`: 2 % of ``n``, 5..200."""
    return int(min(max(5, n // 50), 200, n))


def initial_velocity_weights(n: int) -> np.ndarray:
    """``c`` with ``initial_velocity(y) = c @ y[:c.size]`` for a velocity record of ``n``
    samples (without the position): the estimate is linear in the samples, so its noise is
    ``c @ noise`` (``models.drivetrain.evidence`` carries it into the intervals)."""
    k = _head(n)
    if k < 5:
        return np.ones(1)
    vander = np.vander(np.arange(k, dtype=float), 3, increasing=True)
    return np.linalg.pinv(vander)[0]


def integral(a: np.ndarray, dt: float) -> np.ndarray:
    """Cumulative trapezoid along axis 0, starting at 0 (shape of ``a``)."""
    out = np.zeros_like(a)
    out[1:] = np.cumsum(0.5 * (a[1:] + a[:-1]) * dt, axis=0)
    return out

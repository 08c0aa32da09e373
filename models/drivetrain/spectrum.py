"""What a drive recording's spectrum shows (issue 26): its lowest resonance and the prefilter
cut-off the ``data`` preset fits with.

**The prefilter cut-off** (:func:`prefilter_choice`, ``Scales.prefilter_hz``). The search fits
the prefiltered output error (``IdentificationSettings.prefilter_hz``: a zero-phase
Butterworth low-pass on the residuals). A fixed 25 Hz hid the evidence of machines whose
modes lie higher (issue 26's machines have resonances 5-100 Hz; on the recovery benchmark's
seed 0 three of five misses had their missing mode at 33-88 Hz). The cut-off now follows the
recording:

- the output's spectrum (Welch, Hann segments of a quarter of the record, as
  :func:`resonance`) against its **noise floor**: the median of the spectrum over the top of
  the band (``f >= NOISE_BAND`` x the sampling rate, where a drive's response to torque,
  which falls at least as ``1/f`` above its modes, has sunk below white measurement noise),
  divided by the median of the chi-square law of a Welch estimate;
- the **visible band**: the frequencies up to a quarter of the sampling rate where the
  spectrum lies above that floor beyond chance, a chi-square test at the family-wise level
  ``VISIBLE_ALPHA`` = 0.01 over the bins (Bonferroni) with the degrees of freedom of the
  non-overlapping segments only (a lower bound: the test errs towards "not visible"); its top
  is ``visible_hz``. A resonance is visible in the spectrum only where the output stands
  above its noise, so every visible resonance lies at or below ``visible_hz``;
- the cut-off ``MARGIN`` = 2 x ``visible_hz``: there the forward-backward filter passes
  ``1 / (1 + 2^-8)`` = 99.6 % of the amplitude (and above a mode its evidence continues: the
  motor then moves as its own inertia), bounded to ``[DEFAULT_PREFILTER_HZ, a quarter of the
  sampling rate]``: never below the 25 Hz that the paper's reference (resonance 13.8 Hz) and
  EMPS (position loop 20 Hz) were validated with, never above the band the spectrum is trusted
  in (half the Nyquist frequency, the top of the scales' rigid-body grid); rounded to two
  significant digits (:func:`significant`). Nothing visible (a
  record whose output is noise alone): the default 25 Hz. A recording sampled at 100 Hz
  (EMPS decimated) thus keeps 25 Hz; a noise-free record is visible up to the cap, which
  costs nothing (no noise to filter).

A wider cut-off keeps the structure choice's power: the F-test of ``gp.selection`` counts the
prefilter's effective samples (``N 2 f_c / f_s``), so the noise per counted sample, and with it
the test of a given model error, does not depend on the cut-off. The choice is printed with
the scales (``Scales.summary``) but **not run with by default**: on the recovery benchmark
(16 machines) it found one truth more and lost one, and it lost one of 10 seeds of the
reference with 1 % noise (a gravity torque made significant by the larger count where the
residual is model error, not white noise; docs/drive.md, "The prefilter from the
recording"). ``presets.data_settings(..., prefilter_hz=scales.prefilter_hz)`` runs with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from methods.errors import InputError

DEFAULT_PREFILTER_HZ = 25.0  # the validated cut-off (reference, EMPS); also the lower bound
MARGIN = 2.0  # cut-off / top of the visible band
NOISE_BAND = 0.3  # the noise floor from frequencies above this share of the sampling rate
TOP_BAND = 0.25  # the visible band and the cut-off end at this share of the sampling rate
VISIBLE_ALPHA = 0.01  # family-wise level of "above the noise floor" over the bins
MIN_SAMPLES = 64  # fewer: no spectrum (Welch segments of a quarter of the record >= 16)
PEAK_MIN = 2.0  # a resonance: the compliance above the rigid body's by this factor


@dataclass(frozen=True)
class PrefilterChoice:
    """The cut-off ``cutoff_hz``, the top of the visible band ``visible_hz`` (0: nothing
    visible) and ``why`` in words."""

    cutoff_hz: float
    visible_hz: float
    why: str


def _checked(v: np.ndarray, dt: float) -> np.ndarray:
    values = np.asarray(v, dtype=float).ravel()
    if not (math.isfinite(dt) and dt > 0):
        raise InputError(f"the spectrum needs a positive finite sample time, got {dt!r}")
    if values.size < MIN_SAMPLES:
        raise InputError(
            f"the spectrum (prefilter cut-off) needs at least {MIN_SAMPLES} samples of the "
            f"velocity, got {values.size}; give prefilter_hz explicitly"
        )
    if not np.all(np.isfinite(values)):
        raise InputError(
            f"the velocity has {int(np.sum(~np.isfinite(values)))} non-finite values (NaN or "
            "inf): no spectrum, no prefilter cut-off"
        )
    if np.ptp(values) == 0:
        raise InputError(
            "the velocity is constant: its spectrum shows nothing to choose a prefilter by"
        )
    return values


def visible_top(v: np.ndarray, dt: float) -> float:
    """The top [Hz] of the band where the output ``v`` stands above its noise floor (module
    docstring), 0 when no frequency does; ``InputError`` for fewer than ``MIN_SAMPLES``,
    non-finite or constant values."""
    from scipy.signal import welch
    from scipy.stats import chi2

    values = _checked(v, dt)
    nperseg = int(2 ** math.floor(math.log2(values.size / 4)))
    f, p_vv = welch(values - values.mean(), fs=1.0 / dt, nperseg=nperseg)
    nu = 2 * (values.size // nperseg)  # non-overlapping segments: a lower bound
    noise = p_vv[f >= NOISE_BAND / dt]
    floor = float(np.median(noise)) / (chi2.median(nu) / nu)
    band = (f > 0) & (f <= TOP_BAND / dt)
    if not floor > 0 or not band.any():
        return float(f[band].max()) if band.any() else 0.0  # no noise at all: all visible
    threshold = chi2.ppf(1.0 - VISIBLE_ALPHA / int(band.sum()), nu) / nu
    above = np.flatnonzero(band & (p_vv > threshold * floor))
    return float(f[above].max()) if above.size else 0.0


def prefilter_choice(v: np.ndarray, dt: float) -> PrefilterChoice:
    """The ``data`` preset's prefilter cut-off for a recording's velocity ``v`` sampled every
    ``dt`` (module docstring)."""
    visible = visible_top(v, dt)
    top, low = TOP_BAND / dt, DEFAULT_PREFILTER_HZ
    if not visible:
        return PrefilterChoice(low, 0.0, f"the default {low:g} Hz: the output shows nothing "
                               "above its noise floor")  # fmt: skip
    cutoff = significant(max(low, min(MARGIN * visible, top)))
    if cutoff == low:
        why = f"at least the default {low:g} Hz"
    elif cutoff == significant(top):
        why = f"capped at a quarter of the sampling rate ({top:.4g} Hz)"
    else:
        why = f"{MARGIN:g} x the output's band above its noise"
    return PrefilterChoice(cutoff, visible, f"{why}; the output stands above its noise floor "
                           f"up to {visible:.3g} Hz")  # fmt: skip


def cutoff_above(hz: float, dt: float) -> float:
    """The prefilter cut-off that passes a component at ``hz`` as ``prefilter_choice``'s passes
    the visible band: ``MARGIN`` x ``hz`` rounded up to two significant digits (never below
    the margin); 0.0 (no prefilter) where that lies above a quarter of the sampling rate, the
    band the cut-offs are trusted in."""
    cut = MARGIN * hz
    unit = 10.0 ** (math.floor(math.log10(cut)) - 1)
    cut = significant(math.ceil(cut / unit - 1e-9) * unit)
    return cut if cut <= TOP_BAND / dt else 0.0


def significant(value: float, digits: int = 2) -> float:
    """``value`` > 0 rounded to ``digits`` significant digits (a scale, not a result: the
    spectrum's bins lie 2 Hz apart at 1 kHz and 3 s; recordings of one machine, and EMPS
    decimated to 100 Hz, whose quarter sampling rate is 25.0004 Hz, share one cut-off)."""
    return float(f"{value:.{digits}g}")


def resonance(u: np.ndarray, v: np.ndarray, dt: float, inertia: float, rigid_hz: float) -> float:
    """The frequency [Hz] of the lowest resonance: where the compliance relative to the rigid
    body, ``|H(f)| 2 pi f J`` with ``H = S_uv / S_uu`` the empirical transfer function (Welch,
    segments of a quarter of the record), first exceeds ``PEAK_MIN`` above ``rigid_hz``, its
    largest value within an octave from there; only frequencies below a fifth of the sampling
    rate where the coherence exceeds 0.5 count; 0 when none exceeds (a rigid machine is 1
    everywhere; above a two-mass resonance the ratio stays at ``J / J1``)."""
    from scipy.signal import csd, welch

    if not inertia > 0 or u.size < MIN_SAMPLES:
        return 0.0
    nperseg = int(2 ** math.floor(math.log2(u.size / 4)))
    f, p_uu = welch(u, fs=1.0 / dt, nperseg=nperseg)
    _f, p_vv = welch(v, fs=1.0 / dt, nperseg=nperseg)
    _f, p_uv = csd(u, v, fs=1.0 / dt, nperseg=nperseg)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(p_uv / p_uu) * 2 * math.pi * f * inertia
        coherent = np.abs(p_uv) ** 2 / (p_uu * p_vv) > 0.5
    band = (f > max(rigid_hz, 2 * f[1])) & (f < 0.2 / dt) & coherent & np.isfinite(ratio)
    if not band.any():
        return 0.0
    above = np.flatnonzero(band & (ratio > PEAK_MIN))
    if not above.size:
        return 0.0
    near = band & (f >= f[above[0]]) & (f <= 2.5 * f[above[0]])  # the lowest peak
    return float(f[int(np.argmax(np.where(near, ratio, -np.inf)))])

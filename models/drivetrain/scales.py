"""Orders of magnitude of a drive train from its recording, before any search (issue 13).

**Fit.** The rigid-body inverse dynamics ``u = J a + f_v v + M_C sign(v) + offset`` is linear
in ``(J, f_v, M_C, offset)``: a least-squares fit - the IDIM-LS idea of the EMPS reference -
gives the total inertia, viscous and Coulomb friction and a constant offset (gravity, for a
vertical axis: ``M_G = -offset``). Every column and the input pass through the same zero-phase
4th-order Butterworth low-pass ("parallel filtering"), ``a`` is the central difference of the
filtered velocity. Below its first resonance a flexible machine moves as one rigid body, so
the fit is repeated over a geometric grid of cutoffs (``rigid_grid``: from ``4 / T`` to a
quarter of the sampling rate) and the cutoff with the best R^2 gives the values; the highest
cutoff whose R^2 is within 0.01 of the best is ``rigid_hz``, the band where the machine looks
rigid. Measured: the paper's two-mass reference (J1 + J2 = 0.03, resonance 13.8 Hz) gives
J 0.031 at 3 Hz (R^2 0.999; unfiltered: J 0.011, R^2 0.41); EMPS gives its published values
within 2 %. Samples below 5 % of the largest speed are left out (the sign is undefined there
and stiction dominates).

**Nominals** (``Scales.nominals``): the search's start values and bounds in the recording's
units, so that a machine of any size and shape fits in the boxes (issue 26: the boxes of issue
13, 50..200 % around one guess, excluded a motor with a quarter of the inertia, soft shafts and
lags of a few samples; on ``benchmarks/drive_recovery.py single`` 11 of 12 machines had a true
value outside its box):

- inertias ``J_i``: ``J / 2``, bounds ``0.05 J .. 1.5 J`` (a ladder's split 5..99 %: not the
  issue's 1 %, because the RK4 substeps follow the stiffest corner of the box, where the
  Coulomb tanh acts on the smallest inertia, ``f_tanh M_C / J1``: on EMPS at 100 Hz a two-mass
  with Coulomb friction needs 9 substeps under the old boxes, 48 at 5 %, 457 at 1 %);
  the one mass carries all of ``J``: ``one_mass.J1`` = ``J`` in ``J / 4 .. 1.5 J`` (a key
  ``<submodel>.<name>`` applies to that submodel only, ``submodels.parameter_specs``); a
  three- or four-mass starts at ``J / n`` each, its springs for the resonance as lowest mode;
- ``f_v``, ``M_C``: the estimates, bounds a factor ``WIDE_SPREAD`` = 10 either side (the
  narrow boxes: ``SPREAD`` = 2), when positive and significant (> 2 standard errors), else
  ``0.1 u_rms / v_max`` and ``0.1 u_rms`` with bounds a factor ``FALLBACK_SPREAD`` = 30 either
  side; ``M_C`` up to at least ``u_rms``; Stribeck ``M_S = M_C / 2`` in
  ``M_C / 50 .. max(4 M_C, u_rms)``, ``dq0 = 0.1 v_max`` in ``0.002 .. 1 v_max`` (the rigid
  fit reads Coulomb friction 7-15x low on multi-mass machines with Stribeck friction or
  backlash, and a Stribeck torque without Coulomb friction hardly at all: with 2x boxes the
  kit's own parameters lay outside on such structures, ``benchmarks/drive_recovery.py kit``
  3/10 exact fits, 9/10 with these);
- ``M_G``: ``-offset``, bounds symmetric ``+-max(4 |offset|, 0.5 u_rms)``;
- springs ``c_i``: the resonance ``resonance_hz`` the recording's frequency response shows
  (:func:`resonance`), else ``3 rigid_hz`` (at most a quarter of the sampling rate), between two
  halves of ``J`` (``c = w^2 J / 4``), bounds ``STIFFNESS_DECADES``: ``c / 100 .. 10 c``, the
  lower one at most a 5 % share of ``J`` resonating at the lowest frequency the record resolves
  (a light load shows no resonance); dampers ``d_i``: a damping ratio of 0.05
  (``d = 0.1 sqrt(c J / 4)``), bounds ``WIDE_DAMPING``: ``d / 30 .. 10 d`` (damping ratios
  0.002..0.5 around the seed; ``d / 2 .. 4 d`` missed the kit's own d = 0.05 on every
  multi-mass). The price falls on backlash alone: its gap law acts with ``c / d``, its
  substeps follow ``c_max / d_min`` (EMPS two-mass with backlash: 32 under the narrow boxes,
  158 with ``d / 2``, 2357 with ``d / 30``; the kit's four-mass with backlash 221 at 1 kHz,
  a 36 s fit); the search runs in ``log p`` for every box above zero
  (``IdentificationSettings.log_scale``);
- time constants: ``T_1 = 2 dt``, ``T_d = 5 dt`` (the paper's values in samples), both in
  ``0.5 .. 30 dt``; backlash ``alpha = 1e-3`` of the position range (the paper's 0.005 rad of
  4.6 rad), in ``1e-5 .. 1e-2`` of it;
- the friction tanh gain ``f_tanh = 100 / v_max`` rounded to the nearest of 1, 2, 5 x 10^k (in
  log scale): the paper's 10 s/rad at 10 rad/s, the EMPS preset's 1000 s/m at 0.13 m/s. It is a
  fixed model constant, not a fit: rounded, recordings of one machine share one model (and one
  compiled simulator), and a simulated recording made with the paper's 10 s/rad is modelled
  with exactly that gain (unrounded, 9.79 s/rad made the search add a 1e-5 N m gravity torque
  to the true structure in 4 of 5 seeds, `benchmarks/drive_search.py rates --preset data`).

On the paper's reference every true parameter lies inside these boxes, a machine k times
heavier gets k times the boxes (``tests/models/drivetrain/test_scales.py``), and every split
of the inertia from 6 to 94 % lies inside (``test_identification_issue26.py``). The price of
wide boxes: the RK4 substep count follows the stiffest corner of the box
(``models.drivetrain.simulate``), so a flexible structure simulates with more substeps than
under the narrow boxes.
The values are scales, not results: the search identifies every parameter inside these boxes.

**The prefilter cut-off** (``prefilter_hz``, ``visible_hz``, ``prefilter_why``): twice the top of
the band where the recording's velocity stands above its noise floor, in 25 Hz .. a quarter of
the sampling rate (``models.drivetrain.spectrum``): reported, and run with only when asked
(``presets.data_settings(prefilter_hz=scales.prefilter_hz)``; the default stays 25 Hz).

**A recording that does not excite the drive is refused by name** (``InputError``, exit 2),
before any box is made: a constant or near-constant input (``check_excitation``: the torque's
range at most ``INPUT_SPREAD_MIN`` = 1e-6 of its magnitude), and in ``nominals`` a fit that
explains nothing (R^2 below ``R2_MIN`` = 0.5; a torque of pure noise reached 0.3-0.44
through the best of the cutoffs) or an inertia that is zero in effect (not
above two standard errors, or its torque ``J rms(dv/dt)`` below ``INERTIA_SHARE_MIN`` = 1e-6
of the input's rms). Boxes built on such a fit (a constant torque gave ``J`` = 1.2e-17 at
R^2 0.005) ask the step-size rule for ~1e12 RK4 substeps per sample (issue 28).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from methods.errors import InputError
from models.drivetrain.spectrum import MIN_SAMPLES, prefilter_choice, resonance

COLUMNS = ("J", "f_v", "M_C", "offset")
SPREAD = 2.0  # box factor either side of an estimated friction
FALLBACK_SPREAD = 30.0  # box factor either side of a fallback (not estimated) friction
INERTIA_SHARE = (0.05, 0.99)  # an inertia of a ladder holds 5..99 % of the total (see nominals)
STIFFNESS_DECADES = (100.0, 10.0)  # spring box: below / above the resonance's seed
DAMPING_DECADES = (2.0, 4.0)  # damper box: below / above the seed (damping ratio 0.05)
WIDE_SPREAD = 10.0  # wide boxes: factor either side of an estimated friction
WIDE_DAMPING = (30.0, 10.0)  # wide boxes: damper box below / above the seed
T_MAX_SAMPLES = 30.0  # current-loop lag and dead time up to this many samples
SPEED_FRACTION = 0.05
INPUT_SPREAD_MIN = 1e-6  # relative range of the input below which it does not excite
R2_MIN = 0.5  # a rigid-body fit below this explains nothing (pure noise reached 0.44)
INERTIA_SHARE_MIN = 1e-6  # inertia torque J rms(a) relative to the input's rms
MIN_PEAK = 1e-100  # a torque or velocity column peaking below this cannot be fitted


def check_excitation(
    u: np.ndarray, *, velocity: np.ndarray | None = None, source: str = "recording"
) -> None:
    """``InputError`` when the input ``torque_Nm`` (or the ``velocity``, if given) is constant
    or near-constant (its range at most ``INPUT_SPREAD_MIN`` of its magnitude), or peaks below
    ``MIN_PEAK`` (squares underflow): such a recording does not excite the drive, nothing
    about inertia or friction can be identified from it (and a vanishing column made LAPACK
    loop for ever)."""
    columns = [("torque_Nm", u)] + ([("velocity_rad_s", velocity)] if velocity is not None else [])
    for name, raw in columns:
        values = np.asarray(raw, dtype=float)
        spread = float(np.ptp(values)) if values.size else 0.0
        level = float(np.max(np.abs(values))) if values.size else 0.0
        if spread > INPUT_SPREAD_MIN * level and level >= MIN_PEAK:
            continue
        if spread == 0:
            kind = f"constant ({values[0] if values.size else 0:.6g} in every row)"
        elif level < MIN_PEAK:
            kind = (
                f"vanishing (it peaks at |{level:.3g}|, below {MIN_PEAK:g}: a unit or file error)"
            )
        else:
            kind = (f"near-constant (range {spread:.3g} around {float(np.mean(values)):.6g}, at "
                    f"most {INPUT_SPREAD_MIN:g} of its magnitude)")  # fmt: skip
        raise InputError(
            f"{source}: column {name!r} is {kind}: the recording does not excite the drive, so "
            "its inertia and friction cannot be identified; record a motion driven by a varying "
            "torque (reversing, as the reference excitation of `greylab drive simulate`)"
        )


@dataclass(frozen=True)
class Scales:
    """Estimates (``J`` total inertia, ``f_v`` viscous, ``M_C`` Coulomb, ``offset``), their
    standard errors, ``r2`` of the fit (share of the filtered input's variance explained),
    the samples used, the fit's cutoff ``cutoff_hz`` (0: unfiltered), the rigid band
    ``rigid_hz`` and the recording's ``dt``, ``v_max``, ``u_rms`` and ``q_range``."""

    values: dict[str, float]
    stderr: dict[str, float]
    r2: float
    n_used: int
    cutoff_hz: float = 0.0
    rigid_hz: float = 0.0
    dt: float = 0.0
    v_max: float = 0.0
    u_rms: float = 0.0
    q_range: float = 0.0
    grid: tuple[tuple[float, float], ...] = field(default=(), repr=False)
    a_rms: float = 0.0  # rms of the (unfiltered) acceleration, for the inertia's share
    resonance_hz: float = 0.0  # the frequency response's lowest resonance (0: none found)
    prefilter_hz: float = 0.0  # the spectrum's prefilter cut-off (models.drivetrain.spectrum)
    visible_hz: float = 0.0  # top of the band where the output stands above its noise
    prefilter_why: str = ""  # the reason for ``prefilter_hz`` in words

    def summary(self) -> str:
        parts = ", ".join(f"{k} {v:.4g}" for k, v in self.values.items())
        band = f", low-pass {self.cutoff_hz:.3g} Hz" if self.cutoff_hz else ""
        if self.resonance_hz:
            parts += f"; resonance {self.resonance_hz:.3g} Hz"
        text = (f"scales from the data (rigid-body LS{band}, R^2 {self.r2:.3f}, "
                f"{self.n_used} samples): {parts}")  # fmt: skip
        if self.prefilter_hz:
            text += f"; spectrum's prefilter {self.prefilter_hz:.4g} Hz ({self.prefilter_why})"
        return text

    def to_dict(self) -> dict:
        """Plain JSON: values, standard errors, R^2, the fit's band and R^2 per cutoff."""
        return {"values": dict(self.values), "stderr": dict(self.stderr), "r2": self.r2,
                "n_used": self.n_used, "cutoff_hz": self.cutoff_hz, "rigid_hz": self.rigid_hz,
                "grid": [list(pair) for pair in self.grid],
                "resonance_hz": self.resonance_hz, "prefilter_hz": self.prefilter_hz,
                "visible_hz": self.visible_hz, "prefilter_why": self.prefilter_why}  # fmt: skip

    def _estimate(
        self, name: str, fallback: float, spread: float = 0.0, wide: bool = False
    ) -> tuple[float, tuple[float, float]]:
        """The estimate with a box a factor ``SPREAD`` (``wide``: ``WIDE_SPREAD``) either side
        when positive and significant, else ``fallback`` with a box a factor ``spread``
        (default ``FALLBACK_SPREAD``) either side."""
        value, spread = self.values[name], spread or FALLBACK_SPREAD
        if value > 0 and value > 2 * self.stderr[name]:
            k = WIDE_SPREAD if wide else SPREAD
            return value, (value / k, value * k)
        return fallback, (fallback / spread, fallback * spread)

    def check_explains(self) -> None:
        """``InputError`` when the fit explains nothing: R^2 below ``R2_MIN``, or an inertia
        not above two standard errors or whose torque is below ``INERTIA_SHARE_MIN`` of the
        input (module docstring). Boxes centred on such a fit are meaningless and stiff."""
        J, se = self.values["J"], self.stderr["J"]
        share = J * self.a_rms / self.u_rms if self.u_rms > 0 and self.a_rms > 0 else math.inf
        if self.r2 < R2_MIN:
            why = f"explains R^2 = {self.r2:.3g} of the input (below {R2_MIN:g})"
        elif not J > 2 * se:
            why = (
                f"gives an inertia J = {J:.3g} not distinguishable from 0 (standard error {se:.3g})"
            )
        elif share < INERTIA_SHARE_MIN:
            why = (f"gives an inertia J = {J:.3g} whose torque is {share:.2g} of the input's "
                   f"(below {INERTIA_SHARE_MIN:g}): zero in effect")  # fmt: skip
        else:
            return
        raise InputError(
            f"scales from the data: the rigid-body fit u = J a + f_v v + M_C sign(v) + offset "
            f"{why}; the recording does not excite the drive (or its torque and velocity "
            "columns do not belong together)"
        )

    def nominals(
        self, wide: bool = False
    ) -> tuple[dict[str, float], dict[str, tuple[float, float]], float]:
        """``(nominals, bounds, f_tanh)``: with ``wide`` the boxes of issue 26 (the module
        docstring), else those of issue 13 (``narrow``, the ``data`` preset's default: the
        wide boxes made the reference searched as a user's recording add a gravity torque in
        3 of 3 seeds and EMPS searches 30x slower, ``benchmarks/drive_search.py``)."""
        J = self.values["J"]
        if not J > 0:
            raise InputError(
                f"scales from the data: the rigid-body fit gives a non-positive inertia "
                f"({J:.4g}); give the parameters' nominals (--nominal) or a preset"
            )
        self.check_explains()
        return self._wide() if wide else self._narrow()

    def _narrow(self) -> tuple[dict[str, float], dict[str, tuple[float, float]], float]:
        """Issue 13's boxes: inertias ``J/2`` in ``J/4..1.5 J``, significant friction
        50..200 %, fallbacks x4, springs for ``3 rigid_hz``, the rest 50..200 %."""
        J, dt, v_max, u_rms = self.values["J"], self.dt, self.v_max, self.u_rms
        f_v, f_v_box = self._estimate("f_v", 0.1 * u_rms / v_max, 4.0)
        m_c, m_c_box = self._estimate("M_C", 0.1 * u_rms, 4.0)
        resonance = min(3 * (self.rigid_hz or 0.25 / dt), 0.25 / dt)
        c = (2 * math.pi * resonance) ** 2 * J / 4
        nominals = {"f_v": f_v, "M_C": m_c, "M_S": m_c / 2, "dq0": 0.1 * v_max,
                    "T_1": 2 * dt, "T_d": 5 * dt, "alpha": 1e-3 * (self.q_range or v_max * dt),
                    "M_G": -self.values["offset"]}  # fmt: skip
        half = max(4 * abs(self.values["offset"]), 0.05 * u_rms)
        bounds = {"M_G": (-half, half), "f_v": f_v_box, "M_C": m_c_box}
        for i in range(1, 5):
            nominals[f"J{i}"], bounds[f"J{i}"] = J / 2, (J / 4, 1.5 * J)
        for i in range(1, 4):
            nominals[f"c{i}"], nominals[f"d{i}"] = c, 0.1 * math.sqrt(c * J / 4)
        return nominals, bounds, one_two_five(100.0 / v_max)

    def _wide(self) -> tuple[dict[str, float], dict[str, tuple[float, float]], float]:
        """Issue 26's boxes (module docstring)."""
        J, dt, v_max, u_rms = self.values["J"], self.dt, self.v_max, self.u_rms
        f_v, f_v_box = self._estimate("f_v", 0.1 * u_rms / v_max, wide=True)
        m_c, m_c_box = self._estimate("M_C", 0.1 * u_rms, wide=True)
        nominals = {"f_v": f_v, "M_C": m_c, "M_S": m_c / 2, "dq0": 0.1 * v_max,
                    "T_1": 2 * dt, "T_d": 5 * dt, "alpha": 1e-3 * (self.q_range or v_max * dt),
                    "M_G": -self.values["offset"]}  # fmt: skip
        half = max(4 * abs(self.values["offset"]), 0.5 * u_rms)
        # Coulomb friction up to the input's rms (the rigid fit read M_C 15x low on 4 of the
        # 234 kit structures of up to 4 submodels: multi-mass with Stribeck or backlash)
        m_c_box = (m_c_box[0], max(m_c_box[1], u_rms))
        bounds = {"M_G": (-half, half), "f_v": f_v_box, "M_C": m_c_box,
                  "M_S": (m_c / 50, max(4 * m_c, u_rms)), "dq0": (0.002 * v_max, v_max),
                  "T_1": (0.5 * dt, T_MAX_SAMPLES * dt), "T_d": (0.5 * dt, T_MAX_SAMPLES * dt),
                  "alpha": (nominals["alpha"] / 100, 10 * nominals["alpha"])}  # fmt: skip
        for i in range(1, 5):
            nominals[f"J{i}"], bounds[f"J{i}"] = J / 2, (INERTIA_SHARE[0] * J, 1.5 * J)
        # one mass carries all of J: a narrow box (its lower corner sets the Coulomb tanh's
        # stiffness f_tanh M_C / J1, and so the RK4 substeps; EMPS: 60 s instead of 6 s)
        nominals["one_mass.J1"], bounds["one_mass.J1"] = J, (J / 4, 1.5 * J)
        resonance = self.resonance_hz or min(3 * (self.rigid_hz or 0.25 / dt), 0.25 / dt)
        c = (2 * math.pi * resonance) ** 2 * J / 4
        d = 0.1 * math.sqrt(c * J / 4)
        # a light load on a stiff shaft shows no resonance: the spring may be as soft as the
        # smallest share of the inertia resonating at the lowest frequency the record resolves
        # (the lowest cut-off of the rigid fit's grid; none in an unfiltered fit, ``[0]``)
        slowest = min((f for f, _r2 in self.grid if f > 0), default=resonance)
        c_low = (2 * math.pi * slowest) ** 2 * INERTIA_SHARE[0] * J
        for i in range(1, 4):
            nominals[f"c{i}"], bounds[f"c{i}"] = (
                c,
                (min(c / STIFFNESS_DECADES[0], c_low), c * STIFFNESS_DECADES[1]),
            )
            nominals[f"d{i}"], bounds[f"d{i}"] = d, (d / WIDE_DAMPING[0], d * WIDE_DAMPING[1])
        for n, ladder in ((3, "three_mass"), (4, "four_mass")):  # equal shares, lowest mode
            c_n = (2 * math.pi * resonance) ** 2 * J / (4 * n * math.sin(math.pi / (2 * n)) ** 2)
            for i in range(1, n + 1):
                nominals[f"{ladder}.J{i}"] = J / n
                nominals[f"{ladder}.c{i}"] = c_n  # c{n} and d{n} do not exist: unused
                nominals[f"{ladder}.d{i}"] = 0.1 * math.sqrt(c_n * J / (2 * n))
        return nominals, bounds, one_two_five(100.0 / v_max)


def one_two_five(value: float) -> float:
    """The nearest (in log scale) of 1, 2, 5 x 10^k to ``value`` > 0."""
    decade = 10.0 ** math.floor(math.log10(value))
    return min((m * decade for m in (1, 2, 5, 10)), key=lambda c: abs(math.log(c / value)))


def rigid_grid(dt: float, duration: float) -> list[float]:
    """Cutoffs [Hz] of the fit: geometric (factor 1.5) from a quarter of the sampling rate
    down to ``4 / duration`` (at least four periods in the record)."""
    top, low = 0.25 / dt, 4.0 / duration
    grid: list[float] = []
    f = top
    while f >= low and len(grid) < 40:
        grid.append(f)
        f /= 1.5
    return grid or [top]


def _fit(t: np.ndarray, u: np.ndarray, v: np.ndarray, cutoff_hz: float) -> tuple:
    """One parallel-filtered rigid-body fit: (theta, stderr, r2, n_used)."""
    from scipy.signal import butter, sosfiltfilt

    dt = float(t[1] - t[0])
    if cutoff_hz > 0:
        sos = butter(4, cutoff_hz, fs=1.0 / dt, output="sos")

        def filt(a: np.ndarray) -> np.ndarray:
            return sosfiltfilt(sos, a)
    else:

        def filt(a: np.ndarray) -> np.ndarray:
            return a

    vf = filt(v)
    keep = np.abs(vf) > SPEED_FRACTION * np.max(np.abs(vf))
    keep[[0, -1]] = False  # one-sided differences at the ends
    if keep.sum() < 10 or np.ptp(np.sign(vf[keep])) == 0:
        raise InputError("scales from the data need motion in both directions")
    X = np.column_stack([np.gradient(vf, t), vf, filt(np.sign(vf)), np.ones_like(v)])[keep]
    y = filt(u)[keep]
    col = np.linalg.norm(X, axis=0)
    if not (np.all(col > 0) and np.isfinite(col).all() and np.isfinite(y).all()):
        # LAPACK may loop for ever on NaN (1e-300 velocities hung `drive identify`)
        raise InputError(
            f"scales from the data: a column of the rigid-body fit vanishes or overflows at "
            f"the cutoff {cutoff_hz:.3g} Hz (column norms {np.array2string(col, precision=3)})"
        )
    theta, *_ = np.linalg.lstsq(X / col, y, rcond=None)
    theta = theta / col
    residual = y - X @ theta
    dof = max(len(y) - X.shape[1], 1)
    cov = np.linalg.pinv(X.T @ X) * float(residual @ residual) / dof
    r2 = 1.0 - float(residual @ residual) / float(np.sum((y - y.mean()) ** 2) + 1e-300)
    return theta, np.sqrt(np.diag(cov)), r2, int(keep.sum())


def estimate_scales(
    recording: pd.DataFrame, *, cutoffs: list[float] | None = None, source: str = "recording"
) -> Scales:
    """Rigid-body least squares on ``t_s``, ``torque_Nm``, ``velocity_rad_s`` (and the range of
    ``position_rad`` if present) over ``cutoffs`` [Hz] (default ``rigid_grid``; ``[0]`` fits
    the unfiltered record); the best R^2 wins (module docstring)."""
    t = np.asarray(recording["t_s"], float)
    u = np.asarray(recording["torque_Nm"], float)
    v = np.asarray(recording["velocity_rad_s"], float)
    if t.size < MIN_SAMPLES:  # the spectrum's least (the rigid-body fit needs 10)
        raise InputError(f"scales from the data need at least {MIN_SAMPLES} samples, got {t.size}")
    check_excitation(u, velocity=v, source=source)
    dt = float((t[-1] - t[0]) / (t.size - 1))
    grid = rigid_grid(dt, float(t[-1] - t[0])) if cutoffs is None else list(cutoffs)
    if cutoffs is not None and not (
        grid and all(isinstance(f, numbers.Real) and 0 <= f < math.inf for f in grid)
    ):
        raise InputError(f"scales from the data: cutoffs must be Hz >= 0 (0: unfiltered), "
                         f"at least one, got {list(grid)[:5]!r:.80}")  # fmt: skip
    fits = [(f, *_fit(t, u, v, f)) for f in grid]
    choice = prefilter_choice(v, dt)
    best = max(fits, key=lambda fit: fit[3])
    rigid = max((f for f, *_rest, r2, _n in fits if r2 >= best[3] - 0.01), default=best[0])
    q = recording["position_rad"] if "position_rad" in recording else None
    return Scales(
        values=dict(zip(COLUMNS, best[1].tolist())), stderr=dict(zip(COLUMNS, best[2].tolist())),
        r2=float(best[3]), n_used=best[4], cutoff_hz=float(best[0]), rigid_hz=float(rigid),
        dt=dt, v_max=float(np.max(np.abs(v))), u_rms=float(np.sqrt(np.mean(u**2))),
        q_range=float(np.ptp(np.asarray(q, float))) if q is not None else 0.0,
        grid=tuple((float(f), float(r2)) for f, _th, _se, r2, _n in fits),
        a_rms=float(np.sqrt(np.mean(np.gradient(v, t) ** 2))),
        resonance_hz=resonance(u, v, dt, float(best[1][0]), float(rigid)),
        prefilter_hz=choice.cutoff_hz, visible_hz=choice.visible_hz, prefilter_why=choice.why,
    )  # fmt: skip

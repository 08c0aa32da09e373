"""Random drive machines and their recordings, simulated WITHOUT greylab's kit (issue 26).

The oracle of ``benchmarks/drive_recovery.py``: the equations of each submodel are written
here again from their physics (docs/methods.md, drive section) and integrated by scipy's
``solve_ivp`` (LSODA, rtol 1e-10), not by the kit's assembled state space and RK4 simulator.
Same conventions as the kit: the input is the motor torque at inertia 1, the output the
velocity of inertia 1; friction acts at inertia 1:
``-f_v v - tanh(g v) (M_C + M_S exp(-|v|/dq0))`` with the smoothing gain ``g`` (the kit's
``f_tanh``), gravity adds the constant torque ``M_G``; backlash sits in shaft 1 (gap
``lambda`` in ``[-2 alpha, 0]``, no torque while it moves inside the gap); current control is
a PT1 ``T_1 i' = u - i`` in series at the input; the delay applies ``u(t - T_d)``.

The input is a continuous function of time (a feed-forward torque for a smooth reversing
motion plus a broadband multisine, not the paper's jerk-limited profile), sampled at ``dt``.
A machine without friction keeps any initial velocity offset for ever (nothing decays it):
the plain plan starts at rest but its velocity multisine does not, so such a machine drifts by
``-v_plan(0)`` and 3 of the first 30 moved one way only (refused by the scales, "need motion
in both directions"). When its rigid-body motion (``rigid_velocity``) would not reverse, its
plan is ``windowed``: the velocity itself fades in (``v = ramp s``), the torque is its exact
feed-forward and gravity is held from the first sample (a released brake).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy.integrate import solve_ivp

MASSES = {"one_mass": 1, "two_mass": 2, "three_mass": 3, "four_mass": 4}
RAMP_S = 0.3  # the input fades in over this time [s]
FRICTION = {"coulomb", "viscous", "stribeck"}
REVERSE_SHARE = 0.2  # a motion reverses when it reaches this share of v_max both ways
OTHERS = ("coulomb", "viscous", "stribeck", "gravity", "backlash", "current_control", "delay")


@dataclass(frozen=True)
class Excitation:
    """``u(t) = J a(t) + f v(t) + M tanh(v(t)/v_s) - M_G + broadband(t)``: a rigid body's
    feed-forward torque along a slow multisine velocity ``v`` plus a broadband multisine."""

    slow: tuple[tuple[float, float, float], ...]  # (amplitude rad/s, Hz, phase) of v
    fast: tuple[tuple[float, float, float], ...]  # (amplitude N m, Hz, phase) of the torque
    inertia: float
    friction: float
    coulomb: float
    offset: float
    v_scale: float
    windowed: bool = False  # the velocity plan fades in (module docstring)

    def __call__(self, t: float | np.ndarray) -> np.ndarray:
        t = np.asarray(t, float)
        v, a = np.zeros_like(t), np.zeros_like(t)
        for amp, hz, ph in self.slow:
            w = 2 * math.pi * hz
            v = v + amp * np.sin(w * t + ph)
            a = a + amp * w * np.cos(w * t + ph)
        inside = np.clip(t / RAMP_S, 0.0, 1.0)
        ramp = 0.5 * (1 - np.cos(math.pi * inside))
        if self.windowed:  # v -> ramp v, a -> ramp' v + ramp a (ramp' is 0 at both ends)
            slope = np.where(t < RAMP_S, 0.5 * math.pi / RAMP_S * np.sin(math.pi * inside), 0.0)
            v, a = ramp * v, slope * v + ramp * a
        u = self.inertia * a + self.friction * v + self.coulomb * np.tanh(v / self.v_scale)
        fast = np.zeros_like(t)
        for amp, hz, ph in self.fast:
            fast = fast + amp * np.sin(2 * math.pi * hz * t + ph)
        if self.windowed:
            return u + ramp * fast - self.offset  # gravity held from t = 0
        return ramp * (u + fast - self.offset)  # from rest: u(0) = 0


@dataclass(frozen=True)
class Machine:
    """A drive: its structure (kit names), true parameters, friction gain and excitation."""

    structure: tuple[str, ...]
    params: dict[str, float]
    f_tanh: float
    excitation: Excitation
    dt: float = 1e-3
    duration: float = 3.0
    kind: str = ""
    notes: dict = field(default_factory=dict)

    @property
    def n_masses(self) -> int:
        return next(MASSES[s] for s in self.structure if s in MASSES)


def _rhs(m: Machine):
    """The right-hand side ``x' = F(t, x)`` of ``m`` (states: q1..qN, v1..vN, [lambda], [i])."""
    n, p, s = m.n_masses, m.params, set(m.structure)
    J = np.array([p[f"J{i}"] for i in range(1, n + 1)])
    c = np.array([p[f"c{i}"] for i in range(1, n)])
    d = np.array([p[f"d{i}"] for i in range(1, n)])
    lag, backlash = "current_control" in s, "backlash" in s
    t_d = p.get("T_d", 0.0) if "delay" in s else 0.0
    g = m.f_tanh

    def F(t: float, x: np.ndarray) -> np.ndarray:
        q, v = x[:n], x[n : 2 * n]
        k = 2 * n
        shaft = c * (q[:-1] - q[1:]) + d * (v[:-1] - v[1:])  # torque of shaft i on i+1
        dx = np.zeros_like(x)
        if backlash:
            lam = min(max(x[k], -2 * p["alpha"]), 0.0)  # the gap's walls (sliding on them)
            raw = (v[0] - v[1]) + c[0] / d[0] * (q[0] - q[1] - lam)
            if lam >= 0:
                raw = min(0.0, raw)
            elif lam <= -2 * p["alpha"]:
                raw = max(0.0, raw)
            dx[k] = raw
            shaft[0] = c[0] * (q[0] - q[1] - lam) + d[0] * (v[0] - v[1] - raw)
            k += 1
        u_in = float(m.excitation(max(t - t_d, 0.0)))
        if lag:
            dx[k] = (u_in - x[k]) / p["T_1"]
            u_in = x[k]
        tau = np.zeros(n)
        tau[0] = u_in - p.get("f_v", 0.0) * v[0] + p.get("M_G", 0.0)
        sticky = p.get("M_C", 0.0) + p.get("M_S", 0.0) * math.exp(-abs(v[0]) / p.get("dq0", 1.0))
        tau[0] -= math.tanh(g * v[0]) * sticky
        tau[:-1] -= shaft
        tau[1:] += shaft
        dx[:n] = v
        dx[n : 2 * n] = tau / J
        return dx

    return F


def n_states(m: Machine) -> int:
    return 2 * m.n_masses + ("backlash" in m.structure) + ("current_control" in m.structure)


def simulate_machine(m: Machine, rtol: float = 1e-10, atol_rel: float = 1e-12) -> pd.DataFrame:
    """The noise-free recording of ``m`` (columns of ``schemas.drive``) by ``solve_ivp``."""
    t = np.arange(n_samples(m)) * m.dt
    x0 = np.zeros(n_states(m))
    atol = atol_rel * max(m.notes.get("v_max", 1.0), 1e-9)
    # backlash switches its gap's law on the walls: an explicit method with a bounded step
    # (LSODA's implicit steps chatter on the switch), tolerance relaxed to what RK45 reaches
    slide = "backlash" in m.structure
    sol = solve_ivp(_rhs(m), (0.0, t[-1]), x0, method="RK45" if slide else "LSODA", t_eval=t,
                    rtol=max(rtol, 1e-7) if slide else rtol, atol=atol,
                    max_step=m.dt / 2 if slide else np.inf)  # fmt: skip
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed on {m.kind}: {sol.message}")
    n = m.n_masses
    return pd.DataFrame({"t_s": t, "torque_Nm": m.excitation(t), "velocity_rad_s": sol.y[n],
                         "position_rad": sol.y[0]})  # fmt: skip


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def draw_structure(rng: np.random.Generator, i: int) -> tuple[str, ...]:
    """A valid structure; machine ``i`` cycles the inertia ladders and every other submodel, so
    that each appears in any 8 consecutive machines."""
    mass = list(MASSES)[i % 4]
    others = {OTHERS[i % len(OTHERS)]} | {o for o in OTHERS if rng.uniform() < 0.25}
    if mass == "one_mass":
        others.discard("backlash")
    if "stribeck" in others:
        others.add(rng.choice(["coulomb", "viscous"]))
    return (mass, *sorted(others, key=OTHERS.index))


def _ladder(rng: np.random.Generator, n: int, total: float) -> dict[str, float]:
    """Inertias (motor share 10-90 %), springs with a resonance 5-100 Hz each, damping
    ratios 0.02-0.2."""
    share = rng.uniform(0.1, 0.9) if n > 1 else 1.0
    rest = rng.dirichlet(np.ones(n - 1)) * (1 - share) if n > 1 else np.array([])
    J = np.concatenate([[share], rest]) * total
    J = np.maximum(J, 0.02 * total)
    p = {f"J{i + 1}": float(J[i]) for i in range(n)}
    for i in range(n - 1):
        w = 2 * math.pi * _log_uniform(rng, 5.0, 100.0)
        j_eff = J[i] * J[i + 1] / (J[i] + J[i + 1])
        p[f"c{i + 1}"] = w**2 * j_eff
        p[f"d{i + 1}"] = 2 * _log_uniform(rng, 0.02, 0.2) * math.sqrt(p[f"c{i + 1}"] * j_eff)
    return p


def draw_machine(rng: np.random.Generator, i: int, dt: float = 1e-3) -> Machine:
    """One random machine over the kit (module docstring of ``drive_recovery``)."""
    structure = draw_structure(rng, i)
    n = MASSES[structure[0]]
    total = _log_uniform(rng, 1e-4, 10.0)
    v_max = _log_uniform(rng, 0.5, 20.0)
    p = _ladder(rng, n, total)
    a_typ = v_max * 2 * math.pi * 1.0
    u_typ = total * a_typ
    if "viscous" in structure:
        p["f_v"] = rng.uniform(0.05, 0.3) * u_typ / v_max
    if "coulomb" in structure:
        p["M_C"] = rng.uniform(0.05, 0.3) * u_typ
    if "stribeck" in structure:
        p["M_S"] = rng.uniform(0.05, 0.2) * u_typ
        p["dq0"] = rng.uniform(0.05, 0.3) * v_max
    if "gravity" in structure:
        p["M_G"] = float(rng.choice([-1, 1])) * rng.uniform(0.05, 0.3) * u_typ
    if "backlash" in structure:
        p["alpha"] = rng.uniform(2e-4, 2e-3) * v_max  # a small share of the motion's range
    if "current_control" in structure:
        p["T_1"] = rng.uniform(1.0, 5.0) * dt
    if "delay" in structure:
        p["T_d"] = rng.uniform(2.0, 10.0) * dt
    f_tanh = _log_uniform(rng, 20.0, 500.0) / v_max
    f_top = max(2.0 * _resonance_top(p, n), 20.0)
    slow = tuple((v_max / 3 * rng.uniform(0.6, 1.0), hz, rng.uniform(0, 2 * math.pi))
                 for hz in (0.5, 0.83, 1.17))  # fmt: skip
    fast_hz = np.geomspace(2.0, min(f_top, 0.2 / dt), 12)
    fast = tuple((0.1 * u_typ / math.sqrt(len(fast_hz)), float(hz), rng.uniform(0, 2 * math.pi))
                 for hz in fast_hz)  # fmt: skip
    exc = Excitation(slow, fast, total, p.get("f_v", 0.0), p.get("M_C", 0.0) + p.get("M_S", 0.0),
                     p.get("M_G", 0.0), 0.05 * v_max)  # fmt: skip
    kind = "+".join(structure)
    m = Machine(structure, p, f_tanh, exc, dt, 3.0, kind, {"v_max": v_max, "total": total})
    if not FRICTION & set(structure) and not _reverses(rigid_velocity(m), v_max):
        m = replace(m, excitation=replace(exc, windowed=True))
    return m


def rigid_velocity(m: Machine) -> np.ndarray:
    """The velocity of ``m`` as one rigid body without friction, ``J v' = u + M_G``, on its
    grid (trapezoidal rule): what a frictionless machine does below its resonances."""
    t = np.arange(round(m.duration / m.dt) + 1) * m.dt
    acc = (m.excitation(t) + m.params.get("M_G", 0.0)) / sum(
        v for k, v in m.params.items() if k.startswith("J")
    )
    return np.concatenate([[0.0], np.cumsum(0.5 * (acc[1:] + acc[:-1]) * m.dt)])


def _reverses(v: np.ndarray, v_max: float) -> bool:
    """Moves both ways by at least ``REVERSE_SHARE`` of the planned speed."""
    return bool(v.min() < -REVERSE_SHARE * v_max and v.max() > REVERSE_SHARE * v_max)


def modes_hz(p: dict[str, float], n: int) -> list[float]:
    """The undamped natural frequencies [Hz] of an ``n``-inertia ladder with ``p``'s inertias
    and springs, lowest first, without the rigid-body mode (none for one mass)."""
    if n == 1:
        return []
    K = np.zeros((n, n))
    for i in range(n - 1):
        c = p[f"c{i + 1}"]
        K[i : i + 2, i : i + 2] += c * np.array([[1, -1], [-1, 1]])
    M = np.diag([p[f"J{i + 1}"] for i in range(n)])
    w2 = np.sort(np.linalg.eigvals(np.linalg.solve(M, K)).real)
    return [math.sqrt(w) / (2 * math.pi) for w in w2 if w > 1e-9 * w2[-1]]


def _resonance_top(p: dict[str, float], n: int) -> float:
    """Highest undamped natural frequency [Hz] of the ladder (0 for one mass)."""
    return max(modes_hz(p, n), default=0.0)


def dynamics(m: Machine) -> dict:
    """What of ``m`` a recording shows only in its upper band: the ladder's modes [Hz], the
    current loop's corner ``1 / (2 pi T_1)`` [Hz] and the dead time [ms] (None: absent);
    a search whose prefilter cuts below them sees them only through their low-band effect."""
    n = next(MASSES[k] for k in m.structure if k in MASSES)
    t1, td = m.params.get("T_1"), m.params.get("T_d")
    return {"modes_hz": [round(f, 2) for f in modes_hz(m.params, n)],
            "lag_hz": round(1.0 / (2 * math.pi * t1), 2) if t1 else None,
            "delay_ms": round(1e3 * td, 3) if td else None}  # fmt: skip


def prefilter_arg(text: str) -> str:
    """A benchmark's ``--prefilter``: ``default``, ``spectrum`` or a cut-off in Hz (> 0, as
    text: rows keep it as given)."""
    import argparse

    if text in ("default", "spectrum"):
        return text
    try:
        hz = float(text)
    except ValueError:
        hz = float("nan")
    if not (hz > 0 and hz < float("inf")):
        raise argparse.ArgumentTypeError(
            f"--prefilter must be default, spectrum or a cut-off in Hz > 0, got {text!r}"
        )
    return text


def machine_list(text: str) -> set[int]:
    """``--only 5,7``: machine numbers >= 0 (argparse's type: a clear error otherwise)."""
    import argparse

    try:
        out = {int(part) for part in text.split(",")}
    except ValueError:
        out = {-1}
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(
            f"--only must list machine numbers >= 0 separated by commas, got {text!r}"
        )
    return out


def n_samples(m: Machine) -> int:
    """The rows of ``m``'s recording."""
    return round(m.duration / m.dt) + 1


def machine_recordings(seed: int, percent: float, wanted: set[int] | None = None):
    """``(i, machine, recording)`` for machines 0, 1, 2, ... of ``seed`` as the benchmarks draw
    them: one generator draws each machine, then its noise (``add_noise``, ``percent``). A
    machine not in ``wanted`` (None: all) is drawn and its noise drawn and dropped, not
    simulated (the recording is None): the machines after it are the same, at no ``solve_ivp``
    cost (``tests/models/drivetrain/test_recovery_oracle.py``)."""
    rng = np.random.default_rng(seed)
    i = 0
    while True:
        m = draw_machine(rng, i)
        if wanted is None or i in wanted:
            yield i, m, add_noise(simulate_machine(m), percent, rng)
        else:
            rng.normal(0.0, 1.0, n_samples(m))  # add_noise's draw (its scale draws nothing)
            yield i, m, None
        i += 1


def machine_recording(seed: int, percent: float, i: int) -> tuple[Machine, pd.DataFrame]:
    """Machine ``i`` >= 0 of ``seed`` and its recording, as the benchmarks draw it
    (:func:`machine_recordings`, simulating that one alone)."""
    if not i >= 0:
        raise ValueError(f"machine {i!r} is not a machine number (0, 1, ...)")
    for j, m, rec in machine_recordings(seed, percent, {i}):
        if j == i and rec is not None:
            return m, rec
    raise AssertionError("unreachable: the machines are drawn without end")


def add_noise(rec: pd.DataFrame, percent: float, rng: np.random.Generator) -> pd.DataFrame:
    """White noise of ``percent`` of the velocity's range on the velocity only."""
    out = rec.copy()
    sigma = percent / 100.0 * float(np.ptp(rec["velocity_rad_s"]))
    out["velocity_rad_s"] = rec["velocity_rad_s"] + rng.normal(0.0, sigma, len(rec))
    return out


def preset_settings(rec, wide: bool, prefilter: bool | str, **kwargs):
    """The data preset on ``rec``'s scales (``wide`` boxes or not) at the prefilter cut-off
    ``prefilter`` names: ``"spectrum"`` (or True) the one the recording's spectrum suggests
    (``Scales.prefilter_hz``), a number (text) that cut-off in Hz, ``"default"`` (or False)
    the preset's 25 Hz (:func:`prefilter_arg`)."""
    from models.drivetrain.gp.presets import data_settings
    from models.drivetrain.scales import estimate_scales

    scales = estimate_scales(rec)
    if prefilter is True or prefilter == "spectrum":
        cut = {"prefilter_hz": scales.prefilter_hz}
    elif prefilter is False or prefilter == "default":
        cut = {}
    else:
        cut = {"prefilter_hz": float(prefilter_arg(str(prefilter)))}
    return data_settings(scales, wide=wide, **cut, **kwargs)

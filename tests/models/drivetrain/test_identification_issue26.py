"""Identification that holds on machines shaped unlike the reference (issue 26, part N): the
scales' resonance and boxes, the log-scale coordinates, the initial velocity, and a stalled fit
that is continued instead of being taken as converged."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from benchmarks._drive_machines import add_noise, draw_machine, simulate_machine
from models.drivetrain import reference_recording
from models.drivetrain.gp.evaluate import IndividualSpec, identify
from models.drivetrain.gp.objective import Objective
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.settings import GPSettings, IdentificationSettings
from models.drivetrain.gp.signals import initial_velocity, lowpass
from models.drivetrain.scales import estimate_scales
from models.drivetrain.simulate import get_simulator
from models.drivetrain.submodels import Submodel, parameter_specs

# a two-mass whose motor holds 1/6 of the inertia (J 0.03), resonance
# sqrt(c (1/J1 + 1/J2)) / 2 pi = sqrt(60 (200 + 40)) / 2 pi = 19.1 Hz
LIGHT_MOTOR = {"J1": 0.005, "J2": 0.025, "c1": 60.0, "d1": 0.01}
LIGHT_MOTOR_HZ = math.sqrt(60.0 * (1 / 0.005 + 1 / 0.025)) / (2 * math.pi)


def boxes(rec) -> dict[str, tuple[float, float]]:
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    return {s.name: (s.lower, s.upper) for k in Submodel for s in gp.specs(k)}


def test_the_resonance_is_read_from_the_frequency_response() -> None:
    """Within a factor 1.5 (a seed for a spring box over three decades: Welch segments of
    256 samples resolve 3.9 Hz, the reference excitation has little power there; measured
    27.3 Hz for 19.1); a rigid machine shows none."""
    flexible = reference_recording(["two_mass", "viscous"], LIGHT_MOTOR)
    found = estimate_scales(flexible).resonance_hz
    assert 1 / 1.5 < found / LIGHT_MOTOR_HZ < 1.5
    rigid = reference_recording(["one_mass", "viscous", "coulomb"])
    assert estimate_scales(rigid).resonance_hz == 0.0


@pytest.mark.parametrize("share", [0.06, 0.1, 0.5, 0.9, 0.94])
def test_the_boxes_hold_any_split_of_the_inertia(share: float) -> None:
    """Issue 26: a motor with 25 % of the inertia sat below the box (50..200 % of half the
    total); every split from 6 to 94 % now lies inside, with its spring (the box starts at
    5 %: the substep cost, ``models.drivetrain.scales``). The damper is not checked: its box
    is kept narrow (d/2..4 d around a 5 % damping ratio) for backlash's substeps, and this
    d1 (ratio 0.4-1.6 %) lies below it for most splits - a residual of issue 26."""
    truth = {"J1": 0.03 * share, "J2": 0.03 * (1 - share), "c1": 50.0, "d1": 0.05}
    box = boxes(reference_recording(["two_mass", "viscous"], truth))
    for name, value in truth.items():
        if name == "d1":
            continue
        assert box[name][0] < value < box[name][1], (name, value, box[name])


def test_time_constants_of_many_samples_are_inside() -> None:
    """A current loop of 5 ms and a dead time of 8 ms at 1 kHz (the old boxes ended at 4 ms
    and 10 ms)."""
    truth = {"T_1": 0.005, "T_d": 0.008}
    box = boxes(reference_recording(["one_mass", "viscous", "current_control", "delay"], truth))
    for name, value in truth.items():
        assert box[name][0] < value < box[name][1]


def objective(log_scale: bool) -> Objective:
    rec = reference_recording(["two_mass", "coulomb", "gravity"])
    gp = data_settings(estimate_scales(rec), position=False, wide=True)
    ident = IdentificationSettings(jit=False, log_scale=log_scale)
    data = as_arrays(rec)

    def make(n_samples: int, n_sub: int):
        return get_simulator(("two_mass", "coulomb", "gravity"), n_samples, data.dt, n_sub=n_sub,
                             **gp.kit_options())  # fmt: skip

    sim = make(data.n, 1)
    return Objective(make, sim, data, data.n, ident, sim.model.values(), time.perf_counter())


def test_sign_fixed_parameters_are_searched_in_log_scale() -> None:
    """Each z is a fraction of the box in log(p) for positive boxes (the gravity torque, whose
    box spans 0, stays linear); the map is inverted exactly and its slope is dp/dz."""
    obj = objective(True)
    names = obj.sim.model.param_names
    assert [bool(v) for v in obj.log] == [n != "M_G" for n in names]
    z = np.random.default_rng(0).uniform(0, 1, len(names))
    p = obj.parameters(z)
    np.testing.assert_allclose(obj.normalised(p), z, rtol=1e-12, atol=1e-12)
    mid = obj.parameters(np.full(len(names), 0.5))
    for i, name in enumerate(names):  # the box's middle: geometric mean (log), or mean
        lo, hi = obj.lower[i], obj.lower[i] + obj.width[i]
        assert mid[i] == pytest.approx(math.sqrt(lo * hi) if name != "M_G" else 0.5 * (lo + hi))
    h = 1e-7
    fd = (obj.parameters(z + h) - obj.parameters(z - h)) / (2 * h)
    np.testing.assert_allclose(obj.slopes(z), fd, rtol=1e-6)
    linear = objective(False)
    assert not linear.log.any()
    np.testing.assert_allclose(linear.parameters(z), linear.lower + linear.width * z)


def test_the_time_limit_holds_after_a_jacobian_too() -> None:
    """A Jacobian past the identification's wall-clock limit ends the fit as a residual
    does (``TimeLimitReached``), and one within it returns; the best point stays."""
    from models.drivetrain.gp.objective import TimeLimitReached

    obj = objective(True)
    z = obj.best_z
    assert obj.jacobian(z).shape == (obj.yf.size, z.size)
    obj.residual(z)
    best = obj.best_cost
    obj.clock.time_limit_s = 0.0
    with pytest.raises(TimeLimitReached):
        obj.jacobian(z)
    assert obj.best_cost == best and obj.nfev == 3


def test_the_initial_velocity_comes_from_the_first_samples() -> None:
    """From a measured position, the slope of a cubic is exact for a cubic motion; from a
    noisy velocity alone, the quadratic's value at the first sample has less than half the
    noise's spread (the first sample itself: all of it; 60 samples, three coefficients:
    theory 3 / sqrt(60) = 0.39, over 200 draws measured 0.38)."""
    dt, t = 1e-3, np.arange(3001) * 1e-3
    q = 0.3 + 2.0 * t + 5.0 * t**2 - 7.0 * t**3
    assert initial_velocity(np.zeros_like(t), q, dt) == pytest.approx(2.0, rel=1e-8)
    rng = np.random.default_rng(1)
    errors = [initial_velocity(2.0 + 10 * t + rng.normal(0, 0.1, t.size)) - 2.0
              for _ in range(200)]  # fmt: skip
    assert np.std(errors) < 0.5 * 0.1


def oracle_machine(index: int, noise_percent: float = 0.5):
    rng = np.random.default_rng(0)
    for i in range(index + 1):
        m = draw_machine(rng, i)
        clean = simulate_machine(m)
        rec = add_noise(clean, noise_percent, rng)
    return m, clean, rec


def test_a_machine_without_friction_reaches_the_noise_floor() -> None:
    """Oracle machine 4 (one mass with gravity, no friction: nothing damps an initial error):
    from the first noisy sample the fit ended at 69x the noise floor with M_G 0.9 % off; from
    the position's first samples it reaches the floor (1.02x) and M_G within 0.1 %."""
    m, clean, rec = oracle_machine(4)
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    start = tuple(sorted(gp.nominals))
    ev = identify(IndividualSpec(m.structure, start, refine_above=0.0), as_arrays(rec), gp)
    noise = (lowpass(gp.identification.prefilter_hz, m.dt) or (lambda a: a))(
        rec["velocity_rad_s"].to_numpy() - clean["velocity_rad_s"].to_numpy()
    )
    assert ev.rss < 1.2 * float(noise @ noise)
    assert ev.parameters["M_G"] == pytest.approx(m.params["M_G"], rel=1e-3)


def test_a_fit_stopped_by_its_budget_while_improving_goes_on() -> None:
    """The same start and budget (6 evaluations per round) with and without the continuation:
    without, the fit stops on its budget far from the exact fit; with three more rounds it
    gets lower (measured: RSS 0.72x, 0.93x with the narrower damper box) and says it was
    continued."""
    rec = reference_recording(["two_mass", "viscous"], LIGHT_MOTOR)
    data = as_arrays(rec)
    gp = data_settings(estimate_scales(rec), position=False, wide=True)
    start = tuple(sorted(gp.nominals))
    fits = {}
    for rounds in (0, 3):
        ident = IdentificationSettings(n_starts=1, max_nfev=6, screen_nfev=0, jit=False,
                                       extend_rounds=rounds)  # fmt: skip
        settings = GPSettings(**{**gp.__dict__, "identification": ident})
        fits[rounds] = identify(IndividualSpec(("two_mass", "viscous"), start), data, settings)
    assert "maximum number of function evaluations" in fits[0].message
    assert fits[3].rss < 0.98 * fits[0].rss
    assert "continued" in fits[3].message


def test_a_one_mass_keeps_a_narrow_inertia_box_and_a_typed_nominal_wins() -> None:
    """``one_mass.J1`` (the whole inertia, J/4..1.5 J) applies to the one mass only; a ladder's
    J1 keeps the 5..99 % box; a nominal typed for the plain name J1 (no bounds) replaces both.
    Why: the one mass's lower corner sets the Coulomb tanh's stiffness and so the substeps
    (EMPS {1,5,6,8}: 60 s with the ladder's box, 9 s with its own)."""
    rec = reference_recording(["one_mass", "coulomb", "viscous"])
    gp = data_settings(estimate_scales(rec), position=False, wide=True)
    J = estimate_scales(rec).values["J"]
    (one,) = (s for s in gp.specs("one_mass") if s.name == "J1")
    (two,) = (s for s in gp.specs("two_mass") if s.name == "J1")
    assert (one.nominal, one.lower, one.upper) == pytest.approx((J, J / 4, 1.5 * J))
    assert (two.lower, two.upper) == pytest.approx((0.05 * J, 1.5 * J))
    typed = dict(gp.nominals, J1=0.5)
    bounds = {k: v for k, v in gp.bounds if k != "J1"}
    (j1,) = (s for s in parameter_specs("one_mass", typed, bounds) if s.name == "J1")
    assert (j1.nominal, j1.lower, j1.upper) == (0.5, 0.25, 1.0)


# the rigid fit read M_C 15x low on these (multi-mass with Stribeck or backlash)
LOW_COULOMB = [("three_mass", "coulomb", "backlash", "current_control"),
               ("four_mass", "coulomb", "stribeck", "gravity")]  # fmt: skip


def test_wide_boxes_hold_the_kits_own_parameters() -> None:
    """Oracle: a noise-free recording of any kit structure (``reference_recording``, the kit's
    nominal parameters as the truth) gives wide boxes holding every true value. Before: the
    damper box ``d/2..4d`` missed d = 0.05 on every multi-mass, the friction boxes (2x either
    side of the rigid fit) missed M_C and M_S when the fit read them 7-15x low; measured over
    all 234 structures of up to 4 submodels: 0 misses (here 20 drawn and 2 of the low reads)."""
    from benchmarks._recovery_checks import small_structures

    every = small_structures()
    rng = np.random.default_rng(26)
    picked = [every[j] for j in rng.choice(len(every), 20, replace=False)] + LOW_COULOMB
    for structure in picked:
        box = boxes(reference_recording(structure))
        for kind in structure:
            for spec in parameter_specs(Submodel.parse(kind)):
                lo, hi = box[spec.name]
                assert lo <= spec.nominal <= hi, (structure, spec.name, spec.nominal, lo, hi)


@pytest.mark.parametrize(
    "structure",
    [("three_mass", "viscous", "stribeck"), ("two_mass", "coulomb", "stribeck", "gravity")],
)
def test_the_true_structure_fits_a_kit_recording_exactly(structure) -> None:
    """Recovery of known truth (structures not among the benchmark's ``kit --seed 0`` ones):
    the true structure alone, identified as the search does with wide boxes, fits the kit's
    noise-free recording to RSS <= 1e-6 of sum y^2 (the issue's target; measured 5.6e-10 and
    1.2e-10; {three_mass, viscous, stribeck} ended at 2.2e-3 with the old boxes, its truth
    outside them)."""
    rec = reference_recording(structure)
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    spec = IndividualSpec(structure, tuple(sorted(gp.nominals)), refine_above=0.0)
    ev = identify(spec, as_arrays(rec), gp, seed=0)
    y = rec["velocity_rad_s"].to_numpy()
    assert ev.rss <= 1e-6 * float(y @ y)

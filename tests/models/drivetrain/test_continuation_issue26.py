"""The continuations of a named structure's identification (issue 26,
``models.drivetrain.gp.continuation``): the smoothed backlash law and its sensitivities, the
start of a richer ladder from a simpler fit, and noise-free ``drive simulate`` recordings of
a backlash machine and a three-mass machine that the true structure's own identification now
fits exactly (RSS <= 1e-6 of ``sum y^2``, the issue's target for the kit's recordings)."""

from __future__ import annotations

import numpy as np
import pytest

from models.drivetrain import reference_recording
from models.drivetrain.gp.continuation import from_simpler, simpler_ladder
from models.drivetrain.gp.evaluate import IndividualSpec, identify
from models.drivetrain.gp.presets import data_settings
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.kit import assemble
from models.drivetrain.scales import estimate_scales
from models.drivetrain.simulate import get_simulator
from models.drivetrain.structure_fit import CONTINUATION, continued

BACKLASH = ("two_mass", "coulomb", "backlash")
N = 800  # samples of the Jacobian checks (the reference excitation's first 0.8 s)


def _columns(smoothing: float, n_sub: int) -> tuple[np.ndarray, np.ndarray]:
    """The Jacobian (N, n_p) of the kit's backlash reference at its nominals and the central
    differences (relative step 1e-4) of the same simulator."""
    data = as_arrays(reference_recording(BACKLASH))
    sim = get_simulator(BACKLASH, N, data.dt, n_sub=n_sub, backlash_smoothing=smoothing)
    p, u = sim.model.values({}), data.u[:N]
    _y, jac = sim.simulate_with_jacobian(p, u, 0.0)
    fd = np.empty_like(jac)
    for i in range(p.size):
        up, down = p.copy(), p.copy()
        up[i], down[i] = p[i] * (1 + 1e-4), p[i] * (1 - 1e-4)
        fd[:, i] = (sim.simulate(up, u, 0.0) - sim.simulate(down, u, 0.0)) / (2e-4 * p[i])
    return jac, fd


@pytest.mark.parametrize("n_sub", [2, 16])
def test_the_exact_gap_laws_jacobian_carries_the_impacts(n_sub: int) -> None:
    """The exact law locates each impact inside its substep (``models.drivetrain.gap``), so
    its sensitivities carry the impacts' timing: every column agrees with central differences
    within 1 % (measured at most 0.14 % at 16 substeps: the differences' own truncation
    error). The switching law it replaced had 30-100 % errors and a zero ``alpha`` column."""
    jac, fd = _columns(0.0, n_sub)
    err = np.linalg.norm(jac - fd, axis=0) / np.linalg.norm(fd, axis=0)
    assert np.all(err < 0.01), err


def test_the_smoothed_laws_jacobian_agrees_with_differences() -> None:
    """The smoothing option's law (width 3 % of alpha, 16 substeps): every column within 1 %
    of central differences (measured 0.04-0.2 %)."""
    jac, fd = _columns(0.03, 16)
    err = np.linalg.norm(jac - fd, axis=0) / np.linalg.norm(fd, axis=0)
    assert np.all(err < 0.01), err


def test_the_exact_gap_law_converges_fast_with_its_substeps() -> None:
    """With its impacts located the exact law is accurate at few substeps: on the reference's
    2 s the output's squared error against 256 substeps is below 1e-8 of its variance at 2
    substeps and falls with more (measured 3.8e-10 at 2, 1.5e-11 at 4; the switching law had
    1.4e-4 at 2 and needed more than 128 for 1e-8)."""
    data = as_arrays(reference_recording(BACKLASH))
    fine = get_simulator(BACKLASH, data.n, data.dt, n_sub=256)
    p = fine.model.values({})
    y = fine.simulate(p, data.u, 0.0)
    errs = []
    for n_sub in (2, 4):
        sim = get_simulator(BACKLASH, data.n, data.dt, n_sub=n_sub)
        e = sim.simulate(p, data.u, 0.0) - y
        errs.append(float(e @ e) / float(((y - y.mean()) ** 2).sum()))
    assert errs[0] < 1e-8 and errs[1] < errs[0], errs


def test_the_smoothed_law_tends_to_the_exact_one() -> None:
    """At the kit's nominals the smoothed law's output approaches the exact law's as the width
    falls (measured RSS 5e-3, 3e-4, 7e-6 of sum y^2 at 0.1, 0.01, 0.001 on the whole record):
    each tenth of the width at least 5x closer; the model keeps the exact law by default."""
    data = as_arrays(reference_recording(BACKLASH))
    u = data.u[:N]
    exact = get_simulator(BACKLASH, N, data.dt, n_sub=256)
    y = exact.simulate(exact.model.values({}), u, 0.0)
    gaps = []
    for width in (0.1, 0.01, 0.001):
        sim = get_simulator(BACKLASH, N, data.dt, n_sub=256, backlash_smoothing=width)
        e = sim.simulate(sim.model.values({}), u, 0.0) - y
        gaps.append(float(e @ e) / float(y @ y))
    assert gaps[1] < gaps[0] / 5 and gaps[2] < gaps[1] / 5, gaps
    assert assemble(BACKLASH).backlash_smoothing == 0.0
    assert assemble(["two_mass"], backlash_smoothing=0.1).backlash_smoothing == 0.0


def test_a_richer_ladder_starts_from_the_simpler_fit() -> None:
    """One inertia split in halves (the total kept; by default the last), the new spring
    ``factor`` times the stiffest, with its neighbour's damping ratio, every other parameter
    kept."""
    two = {"J1": 0.01, "J2": 0.04, "c1": 50.0, "d1": 0.05, "f_v": 0.01}
    three = from_simpler(two, 3, 10.0)
    assert three["J2"] == three["J3"] == 0.02 and three["J1"] == 0.01
    assert three["c2"] == 500.0 and three["c1"] == 50.0 and three["f_v"] == 0.01
    assert three["d2"] / np.sqrt(three["c2"]) == pytest.approx(0.05 / np.sqrt(50.0))
    motor = from_simpler(two, 3, 1.0, at=1)  # the motor split: the old shaft moves outwards
    assert (motor["J1"], motor["J2"], motor["J3"]) == (0.005, 0.005, 0.04)
    assert (motor["c1"], motor["c2"], motor["d2"]) == (50.0, 50.0, 0.05)
    assert simpler_ladder(("four_mass", "viscous")) == ("three_mass", "viscous")
    assert simpler_ladder(("two_mass", "viscous")) is None


def _fit(structure: tuple[str, ...], on: bool) -> float:
    """RSS / sum y^2 of the true structure's identification on its noise-free kit recording,
    as ``benchmarks/drive_recovery.py kit`` runs it (the search's screening then refinement,
    wide boxes from the recording's scales), with or without the continuations."""
    rec = reference_recording(structure)
    gp = data_settings(estimate_scales(rec), position=True, wide=True)
    gp = continued(gp) if on else gp
    start = tuple(sorted((sp.name, sp.nominal) for k in structure for sp in gp.specs(k)))
    ev = identify(IndividualSpec(structure, start, refine_above=0.0), as_arrays(rec), gp, seed=0)
    y = rec["velocity_rad_s"].to_numpy()
    return ev.rss / float(y @ y)


@pytest.mark.slow
def test_a_backlash_machine_is_fitted_exactly_with_the_exact_law() -> None:
    """two_mass+coulomb+backlash: with the switching law's Jacobian the fit stalled at 1.4e-4
    of ``sum y^2`` (alpha 4 % off); with the impacts located it is exact from the scales'
    starts, with or without the continuations (measured 1.3e-27 in 1.3 s without them, where
    the smoothing continuation it replaced took 22 s to reach 1.5e-9)."""
    assert "backlash_smoothing" not in CONTINUATION
    assert _fit(BACKLASH, on=False) <= 1e-6
    assert _fit(BACKLASH, on=True) <= 1e-6


@pytest.mark.slow
def test_a_three_mass_machine_is_fitted_exactly_from_the_two_mass_fit() -> None:
    """three_mass+viscous+gravity+delay: a local minimum at 1.1e-2 from the scales' starts
    (the third inertia's spring 20x stiff, an effective two-mass); seeded from the two-mass
    fit it ends exact (measured 2.7e-26: the bound 1e-6 is the issue's, far above it)."""
    structure = ("three_mass", "viscous", "gravity", "delay")
    assert _fit(structure, on=False) > 1e-3
    assert _fit(structure, on=True) <= 1e-6


@pytest.mark.slow
def test_a_fit_from_a_wrong_answers_parameters_reaches_the_truth() -> None:
    """The recovery benchmark's seed-1 machine #1 (two_mass+viscous+backlash, 0.5 % noise, the
    widened search's 71 Hz cut-off and spring boxes): its search once answered gravity added
    (RSS 1.66, 7 parameters) because the truth's fit had ended at 8.37. From that answer's
    parameters with its gravity dropped (here to 4 digits) the smoothing continuation ended at
    10.16 (later 2.49, its start's own RSS: the switching gap law's local minima in alpha).
    With the impacts located, the fit goes below the truth's own RSS (the noise's share it
    fits) with every parameter within 3 % (measured 1.2414 against 1.2609, all within 1.1 %,
    in 8 s at 2 substeps)."""
    from dataclasses import replace

    from benchmarks._drive_machines import machine_recording, preset_settings
    from benchmarks._recovery_checks import truth_rss
    from models.drivetrain.gp.finalists import final_settings
    from models.drivetrain.gp.widening import with_mode_at

    m, rec = machine_recording(1, 0.5, 1)
    assert m.structure == ("two_mass", "viscous", "backlash")
    gp = preset_settings(rec, True, False, position=True, population=10, generations=10)
    gp = with_mode_at(gp, 35.32)  # the widened search's spring boxes and cut-off
    gp = final_settings(replace(gp, identification=replace(gp.identification, prefilter_hz=71.0)))
    start = {"J1": 5.690e-05, "J2": 1.110e-04, "c1": 1.887, "d1": 8.769e-04, "f_v": 1.381e-04,
             "alpha": 3.275e-03}  # fmt: skip
    ev = identify(IndividualSpec(m.structure, tuple(sorted(start.items())), refine=True),
                  as_arrays(rec), gp)  # fmt: skip
    assert not ev.timed_out
    assert ev.rss <= truth_rss(m.structure, m.params, rec, gp, ev.n_sub), ev.rss
    errors = {k: abs(v / m.params[k] - 1) for k, v in ev.parameters.items()}
    assert max(errors.values()) < 0.03, errors

"""EMPS (real data): identification of {one_mass, coulomb, viscous, gravity} and the search."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models.drivetrain.fit_evidence import answer_residuals
from models.drivetrain.gp import IndividualSpec, StructureSearch, as_arrays, identify
from models.drivetrain.gp.presets import EMPS_PUBLISHED, data_settings, emps_settings
from models.drivetrain.scales import estimate_scales
from schemas.drive import emps_path, load_emps

EMPS = emps_path()
# prismatic drive: per-recording nominals in kg, N s/m, N (bounds 50..200 %); tanh gain for m/s;
# residual = velocity error + position error (relative weight 1, see models.drivetrain.gp.evaluate)
SETTINGS = emps_settings()
SETTINGS = replace(SETTINGS, identification=replace(SETTINGS.identification, screen_nfev=0))
PUBLISHED = EMPS_PUBLISHED


@pytest.fixture(scope="module")
def emps_data():
    # shipped in data/emps (no skip: a fresh clone has it; a wrong override fails loudly)
    return as_arrays(load_emps(EMPS, decimate=10))


@pytest.fixture(scope="module")
def emps_fit(emps_data):
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    return identify(spec, emps_data, SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["J1", "f_v", "M_C", "M_G"])
def test_emps_parameters_within_10_percent_of_published(emps_fit, name):
    # published values are IDIM-LS (inverse model); ours is open-loop output error on velocity
    # and position (measured: J1 -2.5 %, f_v -7.1 %, M_C +8.4 %, offset +6.0 %)
    assert emps_fit.parameters[name] == pytest.approx(PUBLISHED[name], rel=0.10)


@pytest.fixture(scope="module")
def idim_ls(emps_data):
    """Independent oracle: the benchmark's own method (IDIM-LS, inverse dynamic model, linear
    least squares) on the same record, in numpy: ``u = J1 a + f_v v + M_C tanh(k v) - M_G``
    with ``a`` the central difference of the velocity and ``k`` the model's tanh gain."""
    v, u = emps_data.y, emps_data.u
    regressors = np.column_stack([np.gradient(v, emps_data.dt), v,
                                  np.tanh(SETTINGS.f_tanh * v), -np.ones_like(v)])  # fmt: skip
    theta, *_ = np.linalg.lstsq(regressors, u, rcond=None)
    return dict(zip(("J1", "f_v", "M_C", "M_G"), theta.tolist()))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["J1", "f_v", "M_C", "M_G"])
def test_emps_inverse_model_oracle_reproduces_the_published_values(idim_ls, name):
    # same method, our 100 Hz decimated record instead of the authors' processing: 3 % covers
    # the acceleration from differences at 100 Hz (measured J1 +2.3 %, the others < 0.5 %)
    assert idim_ls[name] == pytest.approx(PUBLISHED[name], rel=0.03)


@pytest.mark.slow
def test_emps_position_residual_pulls_the_offset_towards_the_inverse_model(
    emps_data, emps_fit, idim_ls
):
    # why the position residual is used: velocity-only output error leaves the offset
    # (gravity M_G = -offset) farther from the inverse-model value than with the position
    # error, which pins the mean force balance (measured vs the oracle's 3.18 N: 3.51 N
    # velocity-only, 3.35 N with position)
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    velocity_only = replace(
        SETTINGS, identification=replace(SETTINGS.identification, position_weight=0.0)
    )
    ev = identify(spec, emps_data, velocity_only)
    # the other parameters agree with the oracle within the 10 % accepted between output- and
    # input-error fits (measured: J1 -3.6 %, f_v -4.9 %, M_C +5.4 %)
    for name in ("J1", "f_v", "M_C"):
        assert ev.parameters[name] == pytest.approx(idim_ls[name], rel=0.10), name
    with_position = emps_fit.parameters["M_G"]
    assert with_position == pytest.approx(idim_ls["M_G"], rel=0.10)
    assert abs(with_position - idim_ls["M_G"]) < abs(ev.parameters["M_G"] - idim_ls["M_G"])


@pytest.mark.slow
def test_emps_search_proposes_one_mass_coulomb_viscous_offset(emps_data, process_map):
    # the whole search over all 11 submodels, as `benchmarks/drive_search.py emps --search
    # --seed 4` (seeds 0..9 all end at {1,5,6,8}; seed 4 took 198 s on 2 workers)
    search = StructureSearch(10, 10, seed=4, settings=emps_settings(), map_batches=process_map)
    search.fit(emps_data)
    assert search.best_structure_ == ["one_mass", "coulomb", "viscous", "gravity"]
    for name, published in PUBLISHED.items():
        assert search.best_parameters_[name] == pytest.approx(published, rel=0.10), name


@pytest.mark.slow
def test_emps_search_finds_the_structure_from_the_recordings_own_scales(process_map):
    """No preset and no nominals (issue 13): the boxes come from the recording's rigid-body
    fit (`models.drivetrain.scales`), as `benchmarks/drive_search.py emps --search --seed 2`
    (seeds 0-2 all end at {1,5,6,8}; seed 2 took 68 s on 2 workers)."""
    frame = load_emps(EMPS, decimate=10)
    settings = data_settings(estimate_scales(frame), position=True)
    search = StructureSearch(10, 10, seed=2, settings=settings, map_batches=process_map)
    search.fit(frame)
    assert search.best_structure_ == ["one_mass", "coulomb", "viscous", "gravity"]
    # the data preset widens its prefilter where the answer's residual shows a periodic
    # component above it (gp.widening); EMPS's is the slow drift, inside the band: it ran once
    assert settings.widen_prefilter and search.widened_ is None
    peak = answer_residuals(search.best_evaluation_, as_arrays(frame), search.settings).periodic
    assert not peak.passed and peak.frequency_hz < 1.0
    for name, published in PUBLISHED.items():
        assert search.best_parameters_[name] == pytest.approx(published, rel=0.10), name

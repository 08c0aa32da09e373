"""EMPS (real data): identification of {one_mass, coulomb, viscous, gravity} and the search."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.drivetrain.gp import IndividualSpec, StructureSearch, as_arrays, identify
from models.drivetrain.gp.presets import EMPS_PUBLISHED, emps_settings
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


@pytest.mark.slow
def test_emps_velocity_only_offset_is_off_by_11_percent(emps_data):
    # documents why the position residual is used: velocity-only output error gives 3.51 N
    spec = IndividualSpec(("one_mass", "coulomb", "viscous", "gravity"),
                          (("J1", 100.0), ("M_C", 20.0), ("f_v", 200.0), ("M_G", 0.0)))  # fmt: skip
    velocity_only = replace(
        SETTINGS, identification=replace(SETTINGS.identification, position_weight=0.0)
    )
    ev = identify(spec, emps_data, velocity_only)
    assert ev.parameters["M_G"] == pytest.approx(1.11 * PUBLISHED["M_G"], rel=0.02)


@pytest.mark.slow
def test_emps_search_proposes_one_mass_coulomb_viscous_offset(emps_data, process_map):
    # the whole search over all 11 submodels, as `benchmarks/drive_search.py emps --search
    # --seed 4` (seeds 0..9 all end at {1,5,6,8}; seed 4 took 198 s on 2 workers)
    search = StructureSearch(10, 10, seed=4, settings=emps_settings(), map_batches=process_map)
    search.fit(emps_data)
    assert search.best_structure_ == ["one_mass", "coulomb", "viscous", "gravity"]
    for name, published in PUBLISHED.items():
        assert search.best_parameters_[name] == pytest.approx(published, rel=0.10), name

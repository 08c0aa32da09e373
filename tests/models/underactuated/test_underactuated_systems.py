"""Every system on its default demand: servo-constraints met, forward check tracks the demand."""

from __future__ import annotations

import numpy as np
import pytest

from methods.dae import forward_check, solve_inverse
from methods.errors import InputError
from models.underactuated import get_system, list_systems

FAST = ["two_mass", "elastic_joint_1", "planar_crane", "ship"]
SLOW = ["chain", "elastic_joint_2", "trolley_crane", "rotary_crane", "aircraft"]


def _check(name):
    s = get_system(name)
    r = solve_inverse(s.problem, s.demand(), method="bdf2", dt=2e-3)
    assert r.max_constraint_violation <= 1e-8
    fc = forward_check(s, r)
    assert fc.success
    # BDF2 at h = 2e-3: control errors O(h^2) ~ 1e-5 relative; the open-loop re-simulation
    # over the whole horizon stays within 1e-4 of the demand (output units m or rad)
    assert fc.max_error < 1e-4, fc.summary()
    return s, r


@pytest.mark.parametrize("name", FAST)
def test_default_demand_fast(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_default_demand_slow(name):
    _check(name)


def test_registry_lists_documented_parameters():
    specs = list_systems()
    assert {s.name for s in specs} == set(FAST + SLOW)  # every system is checked above
    for spec in specs:
        assert spec.description
        for p in spec.parameters:
            assert p.unit and p.description


def test_overrides_are_applied_and_checked():
    s = get_system("two_mass", {"m2": 3.0})
    assert s.params["m2"] == 3.0
    assert s.parameter_table().set_index("name").loc["m2", "value"] == 3.0
    with pytest.raises(InputError, match="unknown parameter 'mass'"):
        get_system("two_mass", {"mass": 1.0})
    with pytest.raises(InputError, match="must be an integer"):
        get_system("chain", {"N": 2.5})
    with pytest.raises(InputError, match="unknown system"):
        get_system("hovercraft")


def test_override_changes_the_controls():
    # heavier output mass: larger force for the same motion (F = m1 m2/k s'''' + (m1+m2) s'')
    a = get_system("two_mass")
    b = get_system("two_mass", {"m2": 4.0})
    ra = solve_inverse(a.problem, a.demand(), dt=5e-3)
    rb = solve_inverse(b.problem, b.demand(), dt=5e-3)
    assert np.max(np.abs(rb.table["F"])) > 1.5 * np.max(np.abs(ra.table["F"]))

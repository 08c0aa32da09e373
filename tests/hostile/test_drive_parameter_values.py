"""Parameter values a machine cannot have, given to the Python API (session 29): the model's
``values`` names a zero, negative, non-finite or non-numeric value instead of simulating it.
Before, ``simulate`` took a zero backlash gap silently and the exact gap law answered a
machine that cannot exist (its output differed from the gap -> 0+ limit); only the CLI's
``--set`` refused it. A torque that may take either sign (``M_G``) stays free."""

from __future__ import annotations

import numpy as np
import pytest

from methods.errors import InputError
from models.drivetrain.kit import assemble
from models.drivetrain.product import DriveModel
from models.drivetrain.simulate import simulate
from models.drivetrain.submodels import canonical, parse_structure

TORQUE = 0.02 * np.sin(2 * np.pi * 2.0 * np.arange(300) * 1e-3)


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("alpha", 0.0, "alpha = 0: half backlash gap"),
        ("alpha", -1e-3, "alpha = -0.001"),
        ("J2", -0.01, "J2 = -0.01: inertia 2 [kg m^2] must be > 0"),
        ("c1", float("nan"), "c1: nan is not a finite number"),
        ("d1", float("inf"), "d1: inf is not a finite number"),
        ("J1", "lots", "J1: 'lots' is not a number"),
        ("J1", None, "J1: None is not a number"),
    ],
)
def test_simulate_names_a_value_no_machine_has(name: str, value: object, words: str) -> None:
    with pytest.raises(InputError, match=words.replace("[", r"\[").replace("^", r"\^")):
        simulate("two_mass,backlash", TORQUE, 1e-3, {name: value})  # type: ignore[dict-item]


def test_a_torque_of_either_sign_and_a_numeric_string_pass() -> None:
    y_neg = simulate("one_mass,gravity", TORQUE, 1e-3, {"M_G": -0.01})
    y_pos = simulate("one_mass,gravity", TORQUE, 1e-3, {"M_G": 0.01})
    # the gravity torque enters with opposite signs: the two runs drift apart
    assert np.all(np.isfinite(y_neg)) and y_neg[-1] != pytest.approx(y_pos[-1])
    a = simulate("two_mass,backlash", TORQUE, 1e-3, {"alpha": "0.002"})  # type: ignore[dict-item]
    b = simulate("two_mass,backlash", TORQUE, 1e-3, {"alpha": 0.002})
    np.testing.assert_array_equal(a, b)


def test_a_stored_model_cannot_open_a_box_below_zero() -> None:
    """A product file edited by hand (or crafted): before, a box ``[-0.02, 0.02]`` let a
    negative inertia through ``from_dict`` and the simulation ran a mass < 0."""
    model = assemble(parse_structure("one_mass,viscous"))
    params = {s.name: s.nominal for s in model.specs} | {"J1": -0.01}
    for box, words in (([-0.02, 0.02], "got -0.02"), ([0.0, 0.02], "got 0")):
        with pytest.raises(InputError, match=r"^drive model: bounds of J1 \(inertia 1, > 0 on "
                           rf"every machine\): the lower bound must be > 0, {words}"):  # fmt: skip
            DriveModel.from_dict({"structure": ["one_mass", "viscous"], "parameters": params,
                                  "dt": 1e-3, "bounds": {"J1": box}})  # fmt: skip


@pytest.mark.parametrize("box", [(1e-3, float("inf")), (float("nan"), 1.0), (-float("inf"), 0.1)])
def test_a_box_must_be_finite(box: tuple[float, float]) -> None:
    with pytest.raises(InputError, match="bounds of M_G must be finite"):
        assemble(parse_structure("one_mass,gravity"), bounds={"M_G": box})


def test_the_sign_rule_is_the_kits_not_the_users_box() -> None:
    """A box the user gives does not make a torque of either sign positive, nor may it make
    a positive quantity's values free."""
    y = simulate("one_mass,gravity", TORQUE, 1e-3, {"M_G": -0.1}, bounds={"M_G": (0.1, 0.5)})
    assert np.all(np.isfinite(y))
    with pytest.raises(InputError, match=r"J1 = -0\.01"):
        assemble(parse_structure("one_mass,gravity")).values({"J1": -0.01})


def test_a_structure_string_splits_at_the_separators_results_print() -> None:
    """``"two_mass+backlash"`` (how results print a structure) was iterated letter by letter
    ("unknown submodel 't'")."""
    want = canonical(["two_mass", "backlash"])
    for text in ("two_mass+backlash", "two_mass,backlash", "backlash; two_mass", "2+9"):
        assert canonical(text) == want
    with pytest.raises(InputError, match="unknown submodel 'spring'"):
        parse_structure("two_mass+spring")


def test_a_crafted_submodel_name_is_refused_with_a_short_echo() -> None:
    """5000 digits raised ``ValueError`` from ``int()`` (Python's 4300-digit limit), not a
    named error; a 10,000-letter name was echoed whole."""
    with pytest.raises(InputError, match=r"unknown submodel code '1111.*\.\.\.' \(valid"):
        parse_structure("two_mass+" + "1" * 5000)
    with pytest.raises(InputError, match="unknown submodel") as info:
        parse_structure("two_mass+" + "a" * 10_000)
    assert len(str(info.value)) < 300

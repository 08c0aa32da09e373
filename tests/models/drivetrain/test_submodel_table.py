"""The drive-train kit's submodels are one table (`models.drivetrain.submodels.KIT`, issue 29):
explicit paper codes, parameters, rules, assembly step and scale rule per row. A submodel that
is missing from any place that must know it fails here: the Enum, the assembly steps, the data
preset's nominals, the docs' table, the command line and the form."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from methods.errors import InputError
from models.drivetrain.kit import STEPS, assemble
from models.drivetrain.submodels import KIT, MULTI_MASS, ROWS, Submodel, parse_structure

ROOT = Path(__file__).resolve().parents[3]


def test_one_row_per_submodel_with_its_own_explicit_code() -> None:
    assert [row.kind for row in KIT] == list(Submodel)  # every member, once, in code order
    codes = [row.code for row in KIT]
    assert codes == sorted(set(codes)), "codes are unique and ascending"
    assert [Submodel.parse(str(c)) for c in codes] == list(Submodel)
    with pytest.raises(InputError, match=r"valid: 1, 2, 3, .*, 11\)"):
        Submodel.parse("12")


def test_rules_come_from_the_rows() -> None:
    assert MULTI_MASS == {row.kind for row in KIT if row.masses}
    for row in KIT:
        for other in row.excludes:
            assert row.kind in ROWS[other].excludes, "an exclusion holds both ways"
            assert row.why_excludes, f"{row.kind.value}: say why it excludes {other.value}"
    with pytest.raises(InputError, match="one_mass excludes backlash"):
        parse_structure(["one_mass", "backlash"])
    parse_structure(["two_mass", "backlash"])  # the rule names only that pair


@pytest.mark.parametrize("row", KIT, ids=[r.kind.value for r in KIT])
def test_each_row_is_assembled_by_its_step_with_its_parameters(row) -> None:
    assert row.step in STEPS and row.scale and row.description
    ladder = row.kind if row.masses else Submodel.TWO_MASS
    space = assemble({ladder, row.kind})
    names = {spec.name for spec in space.specs}
    assert {p.name for p in row.parameters} <= names


@pytest.mark.parametrize("row", KIT, ids=[r.kind.value for r in KIT])
def test_the_data_preset_centres_every_parameter_on_the_recording(row) -> None:
    """The row's scale rule exists: `Scales.nominals` gives each of its parameters a value."""
    from models.drivetrain import reference_recording
    from models.drivetrain.scales import estimate_scales

    scales = estimate_scales(reference_recording())
    for wide in (False, True):
        nominals, _bounds, *_ = scales.nominals(wide=wide)
        for name in (spec.name for spec in row.parameters):
            assert name in nominals or f"{row.kind.value}.{name}" in nominals, (
                f"{row.kind.value}.{name}: no nominal from the data preset (wide={wide})"
            )


def test_the_docs_table_lists_every_row() -> None:
    text = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    table = text[text.index("### 2.1 Submodels") : text.index("### 2.2")]
    for row in KIT:
        names = re.findall(r"^\| ([\d-]+) \|", table, re.M)
        covered = {n for part in names for n in _codes(part)}
        assert row.code in covered, f"docs/methods.md §2.1 does not list code {row.code}"
        for spec in row.parameters:
            ladder_name = re.sub(r"\d$", "_i", spec.name)  # J1, c2 -> `J_i`, `c_i`
            assert f"`{spec.name}`" in table or f"`{ladder_name}`" in table, spec.name


def _codes(cell: str) -> range:
    first, _, last = cell.partition("-")
    return range(int(first), int(last or first) + 1)


def test_the_command_line_and_the_form_know_every_submodel() -> None:
    from flows.drive.settings import DriveSearch

    for row in KIT:
        by_code = DriveSearch(structure=[str(row.code), *(["2"] if not row.masses else [])])
        assert row.kind.value in by_code.structure or str(row.code) in by_code.structure
    schema = DriveSearch.model_json_schema()
    listed = set(schema["properties"]["structure"]["items"]["enum"])  # the form's choices
    assert listed == {k.value for k in Submodel}

"""Rules: the study by columns, the campaign by name, safe file names."""

from __future__ import annotations

import pytest

from ingestion.names import safe_name
from ingestion.rules import DRIVE_COLUMNS, PRESS_COLUMNS, Study, campaign_of, classify
from schemas.errors import DataError


@pytest.mark.parametrize(
    ("columns", "study"),
    [
        (["series", "step", "force_setpoint_N", "force_N", "sensor", "displacement_um"], "press"),
        (["series", "step", "force_setpoint_N", "force_N", "sensor"], "press"),  # one missing
        (["t_s", "torque_Nm", "velocity_rad_s"], "drive"),
        (["t_s", "torque_Nm", "velocity_rad_s", "position_rad", "note"], "drive"),
        (["t_s", "torque_Nm"], "drive"),
    ],
)
def test_classify_by_columns(columns: list[str], study: str) -> None:
    assert classify(columns) == Study(study)


@pytest.mark.parametrize(
    ("columns", "words"),
    [
        (["a", "b"], "neither"),
        (["series", "t_s"], "neither"),
        (
            [*PRESS_COLUMNS, *DRIVE_COLUMNS],
            "ambiguous",
        ),
    ],
)
def test_classify_rejects_neither_and_both(columns: list[str], words: str) -> None:
    with pytest.raises(DataError, match=words):
        classify(columns, source="x.csv")


@pytest.mark.parametrize(
    ("name", "campaign"),
    [
        ("line-3__2026-05-01_run2.csv", "line-3"),
        ("line-3__a__b.parquet", "line-3"),
        ("Line-3__x.csv", "default"),  # upper case is not a campaign
        ("line_3__x.csv", "default"),
        ("line-3_x.csv", "default"),
        ("__x.csv", "default"),
        ("line-3__.csv", "default"),
        ("../x__y.csv", "default"),
        ("rig__a\nb.csv", "rig"),
    ],
)
def test_campaign_from_name(name: str, campaign: str) -> None:
    assert campaign_of(name) == campaign


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", ".bashrc", "..", "a\nb.csv", "x/../../y.csv", "C:\\win\\f.csv", "", "é"],
)
def test_safe_name_is_a_plain_visible_file_name(name: str) -> None:
    safe = safe_name(name)
    assert safe and "/" not in safe and "\\" not in safe and ".." not in safe
    assert not safe.startswith(".")
    assert all(c.isalnum() or c in "._-" for c in safe)


def test_safe_name_shortens_and_keeps_extension() -> None:
    safe = safe_name("x" * 500 + ".parquet")
    assert len(safe) == 120 and safe.endswith(".parquet")

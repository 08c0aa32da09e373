"""Rules: the study by columns, the campaign by name, safe file names."""

from __future__ import annotations

import pytest

from ingestion.names import safe_name
from ingestion.rules import (
    DRIVE_COLUMNS,
    PRESS_COLUMNS,
    CampaignNameError,
    Study,
    campaign_of,
    campaign_or_problem,
    classify,
)
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
        ("line-3__.csv", "line-3"),  # nothing after `__`: still meant as campaign line-3
        ("line-3_x.csv", "default"),  # no `__`: not meant to name a campaign
        ("Run 01 (copy).csv", "default"),
        ("rig__a\nb.csv", "rig"),
        ("x" * 64 + "__a.csv", "x" * 64),
    ],
)
def test_campaign_from_name(name: str, campaign: str) -> None:
    assert campaign_of(name) == campaign
    assert campaign_or_problem(name) == (campaign, None)


@pytest.mark.parametrize(
    ("name", "part", "words"),
    [
        ("Line_1__run.csv", "'Line_1'", ["'L' (upper case)", "'_'", "'line-1__...'"]),
        ("line_3__x.csv", "'line_3'", ["'_'", "'line-3__...'"]),
        ("line.3__x.csv", "'line.3'", ["'.'"]),
        ("__x.csv", "''", ["empty"]),
        ("x" * 65 + "__a.csv", "'" + "x" * 65 + "'", ["65 characters, at most 64"]),
        ("../x__y.csv", "'../x'", ["'/'"]),
        ("a b__c.parquet", "'a b'", ["' '"]),
    ],
)
def test_invalid_campaign_part_is_an_error_naming_file_part_and_rule(
    name: str, part: str, words: list[str]
) -> None:
    """A name with `__` was meant to name a campaign: never filed under `default` silently."""
    with pytest.raises(CampaignNameError) as error:
        campaign_of(name, source=name)
    message = str(error.value)
    assert isinstance(error.value, DataError)  # so ingestion quarantines the file
    assert message.startswith(f"{name}: invalid campaign {part}")
    assert "[a-z0-9-]{1,64}" in message and "'default'" in message
    assert all(w in message for w in words), message
    assert campaign_or_problem(name, source=name) == (None, message)


def test_campaign_quote_is_bounded() -> None:
    with pytest.raises(CampaignNameError) as error:
        campaign_of("Y" * 10_000 + "__a.csv")
    assert len(str(error.value)) < 600


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

from __future__ import annotations

import pytest

from methods import correct_to_setpoints
from models.press import simulate_press


@pytest.fixture(scope="session")
def twin_m3():
    """Default twin, truth M3, seed 1, corrected to setpoints; and its sensor sheet."""
    table, sheet = simulate_press("M3", seed=1)
    return correct_to_setpoints(table), sheet

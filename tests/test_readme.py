"""The README's Python examples run as written (users copy them into notebooks); the block
"Use a model" needs registered models and runs in tests/integration/test_model_registry.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_press_api_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    press = next(b for b in blocks if "detect_model_uncertainty" in b)
    namespace: dict = {}
    exec(compile(press, "README.md", "exec"), namespace)
    assert namespace["design"].best["code"] == "110"
    assert namespace["detection"].rejected is False  # the twin's truth is M3
    assert set(namespace["fit"].parameters) == {"k5", "k7"}


@pytest.mark.slow
def test_drive_api_example_runs() -> None:
    """The StructureSearch block as written: the paper's reference recording, 10 x 10, seed 0
    (a seed that finds the exact structure, benchmarks/drive_search.py)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    drive = next(b for b in blocks if "StructureSearch" in b)
    namespace: dict = {}
    exec(compile(drive, "README.md", "exec"), namespace)
    best = namespace["search"].best_structure_
    assert set(best) == {"two_mass", "coulomb", "viscous", "stribeck"}, best

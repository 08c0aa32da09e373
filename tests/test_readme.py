"""The README's Python example runs as written (users copy it into notebooks)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_press_api_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    press = next(b for b in blocks if "detect_model_uncertainty" in b)
    namespace: dict = {}
    exec(compile(press, "README.md", "exec"), namespace)
    assert namespace["design"].best["code"] == "110"
    assert namespace["detection"].rejected is False  # the twin's truth is M3
    assert set(namespace["fit"].parameters) == {"k5", "k7"}

"""Small modules and short functions: every module and function fits in one person's head.

Limits (issue "One shape for every study"): no module over 400 lines, no function over 80
lines, in the product and in its tests. Generated code is not kept in the repository (the
CasADi C sources are written to the JIT cache), so nothing is exempt.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
PACKAGES = ("methods", "models", "schemas", "ingestion", "tasks", "deployments", "flows")
TREES = (*PACKAGES, "benchmarks", "tests")


def oversize(path: Path, shown: str | None = None) -> list[str]:
    """Messages for a module over the line limit and each function over its limit."""
    text = path.read_text(encoding="utf-8")
    name = shown or str(path)
    found = []
    lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: module of {lines} lines > {MAX_MODULE_LINES}")
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}() of {length} lines")
    return found


@pytest.mark.parametrize("tree", TREES)
def test_modules_and_functions_stay_small(tree: str) -> None:
    found = [
        message
        for path in sorted((ROOT / tree).rglob("*.py"))
        for message in oversize(path, str(path.relative_to(ROOT)))
    ]
    assert not found, "\n".join(found)


def test_checker_sees_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    long_function = tmp_path / "f.py"
    long_function.write_text(f"def f():\n{body}\n")
    assert oversize(long_function, "f.py") == ["f.py:1 f() of 81 lines"]
    short = tmp_path / "g.py"
    short.write_text("def g():\n" + "\n".join(body.splitlines()[:-1]) + "\n")
    assert oversize(short) == []
    long_module = tmp_path / "m.py"
    long_module.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert oversize(long_module) == [f"{long_module}: module of 401 lines > 400"]

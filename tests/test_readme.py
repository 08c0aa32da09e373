"""The README is a map (issue 29) and the documentation's Python examples run as written (users
copy them into notebooks); the block "Use a model" of docs/products.md needs registered models
and runs in tests/integration/test_model_registry.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _python_block(document: Path, marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", document.read_text(encoding="utf-8"), re.S)
    return next(b for b in blocks if marker in b)


def _anchors(document: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped,
    spaces to hyphens), outside code fences."""
    anchors, fence = set(), False
    for line in document.read_text(encoding="utf-8").splitlines():
        fence ^= line.startswith("```")
        if not fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_the_readme_is_a_map() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200: details go to docs/)"
    assert lines[3].startswith("make demo ") and lines[4].startswith("make test "), lines[:6]
    contents = lines.index("## Contents")
    assert contents < 40, "the table of contents is on the first screen"
    toc = [line for line in lines[contents:40] if line.startswith("- [")]
    assert len(toc) >= 8, toc
    assert {p.name for p in DOCS} <= {m.split("/")[-1] for m in LINK.findall("\n".join(lines))}, (
        "every page of docs/ is linked from the README"
    )


@pytest.mark.parametrize("document", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(document: Path) -> None:
    """A link to a file names one that exists; a link to a heading names one that exists."""
    broken = []
    for target in LINK.findall(document.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    assert not broken, f"{document.name}: {broken}"


def test_press_api_example_runs() -> None:
    press = _python_block(ROOT / "docs" / "press.md", "detect_model_uncertainty")
    namespace: dict = {}
    exec(compile(press, "docs/press.md", "exec"), namespace)
    assert namespace["design"].best["code"] == "110"
    assert namespace["detection"].rejected is False  # the twin's truth is M3
    assert set(namespace["fit"].parameters) == {"k5", "k7"}


@pytest.mark.slow
def test_drive_api_example_runs() -> None:
    """The StructureSearch block as written: the paper's reference recording, 10 x 10, seed 0
    (a seed that finds the exact structure, benchmarks/drive_search.py)."""
    drive = _python_block(ROOT / "docs" / "drive.md", "StructureSearch")
    namespace: dict = {}
    exec(compile(drive, "docs/drive.md", "exec"), namespace)
    best = namespace["search"].best_structure_
    assert set(best) == {"two_mass", "coulomb", "viscous", "stribeck"}, best

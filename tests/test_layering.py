"""Every import between top-level packages follows the layer order of docs/ARCHITECTURE.md.

The order is read from the document itself (the fenced ``layers`` block), so the rule and its
description cannot drift apart. A package may import only packages of strictly lower layers;
that excludes every package-level cycle. The pure layers never import orchestration/tracking.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
ORCHESTRATION = {"prefect", "prefect_dask", "mlflow", "dask", "distributed"}
PURE = ("methods", "models", "schemas", "ingestion")


def read_layers(text: str) -> list[list[str]]:
    """The ```layers block: one layer per line, lowest first, packages separated by commas."""
    match = re.search(r"```layers\n(.*?)```", text, flags=re.S)
    if match is None:
        raise AssertionError("docs/ARCHITECTURE.md has no ```layers block")
    layers = []
    for line in match.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            layers.append([name.strip() for name in line.split(",") if name.strip()])
    return layers


def imported_top_levels(path: Path) -> dict[str, int]:
    """Top-level names imported anywhere in a file (also inside functions) -> first line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.setdefault(alias.name.split(".")[0], node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.setdefault(node.module.split(".")[0], node.lineno)
    return names


def violations(root: Path, layers: list[list[str]]) -> list[str]:
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    found = []
    for package, own in rank.items():
        for path in sorted((root / package).rglob("*.py")):
            for name, line in imported_top_levels(path).items():
                if name in rank and name != package and rank[name] >= own:
                    where = path.relative_to(root)
                    found.append(f"{where}:{line} imports {name} (layer {rank[name]} >= {own})")
                if package in PURE and name in ORCHESTRATION:
                    found.append(f"{path.relative_to(root)}:{line} imports {name} (pure layer)")
    return found


LAYERS = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))


def test_every_top_level_package_has_a_layer() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} | {
        p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))
    }
    packages -= {"tests", ".venv"}
    listed = [name for layer in LAYERS for name in layer]
    assert len(listed) == len(set(listed)), f"a package is listed twice: {LAYERS}"
    assert packages <= set(listed), f"packages without a layer: {sorted(packages - set(listed))}"


def test_no_import_against_the_layer_order() -> None:
    found = violations(ROOT, LAYERS)
    assert not found, "imports against docs/ARCHITECTURE.md layers:\n" + "\n".join(found)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"low/a.py": "import high.x\n", "high/b.py": "from low import a\n"}, ["imports high"]),
        ({"low/a.py": "def f():\n    from high import x\n"}, ["low/a.py:2 imports high"]),
        ({"high/b.py": "import low.a\nfrom high import y\n"}, []),
        ({"low/a.py": "import prefect\n"}, []),
        (
            {"side/a.py": "import other\n", "other/b.py": "x = 1\n"},
            ["imports other (layer 1 >= 1)"],
        ),
    ],
)
def test_checker_catches_upward_sideways_and_nested_imports(
    tmp_path: Path, files: dict[str, str], expected: list[str]
) -> None:
    found = violations(_tree(tmp_path, files), [["low"], ["side", "other"], ["high"]])
    assert len(found) == len(expected), found
    for message, part in zip(found, expected, strict=True):
        assert part in message


def test_checker_sees_orchestration_in_a_pure_layer(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"methods/a.py": "import os\nfrom prefect import flow\n"})
    assert violations(root, [["methods"]]) == ["methods/a.py:2 imports prefect (pure layer)"]


def test_layers_block_is_parsed_lowest_first() -> None:
    text = "x\n```layers\nmethods  # pure\nmodels, schemas\n\nflows\n```\n"
    assert read_layers(text) == [["methods"], ["models", "schemas"], ["flows"]]


def _type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:`: imports for annotations only, never executed."""
    return isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"


def module_graph(root: Path, packages: list[str]) -> dict[str, set[str]]:
    """Project module -> the project modules it imports (also inside functions; not those
    under `if TYPE_CHECKING:`, which never run); `from a import b` counts as an import of the
    module `a.b` when that is a module, else of `a`."""
    paths = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for block in ast.walk(tree) if _type_checking(block)
                       for n in ast.walk(block)}  # fmt: skip
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found |= {full} if full in paths else {node.module} & set(paths)
        graph[name] = found - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_circle_between_modules() -> None:
    """Issue 29: no two modules import each other, directly or around a circle, not even
    inside functions (a lazy import hides a circle; it does not remove it)."""
    packages = [name for layer in LAYERS for name in layer if (ROOT / name).is_dir()]
    cycles = import_cycles(module_graph(ROOT, packages))
    assert not cycles, f"import circles: {cycles}"


def test_cycle_checker_finds_a_lazy_circle(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import x\n",
                            "pkg/b.py": "def f():\n    from pkg import a\n",
                            "pkg/c.py": "import pkg.a\n"})  # fmt: skip
    assert import_cycles(module_graph(root, ["pkg"])) == [["pkg.a", "pkg.b"]]

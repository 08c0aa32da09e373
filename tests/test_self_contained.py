"""The product needs nothing outside the repository: no reference to the lab's shared folder or
to a methods file that is not shipped, and the shipped benchmark data exist and load."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from schemas.drive import EMPS_DEFAULT, EMPS_PULSES_DEFAULT, load_emps

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve()
# spelled in pieces so that this file does not match itself
FORBIDDEN = ("../" + "shared", "shared" + "/data", "shared" + "/DESIGN", "shared" + "/PLATFORM",
             "METHODS" + ".md")  # fmt: skip
SKIP_DIRS = {".git", ".venv", ".greylab", "__pycache__", ".mypy_cache", ".ruff_cache",
             ".pytest_cache", ".hypothesis", "build", "dist", "out", "lab-inbox"}  # fmt: skip
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".cfg", ".ini", ".json", ""}


def _tracked_files() -> list[Path]:
    git = shutil.which("git")
    if git and (ROOT / ".git").exists():
        out = subprocess.run([git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        names = [n for n in out.stdout.decode().split("\0") if n]
        return [ROOT / n for n in names if (ROOT / n).is_file()]
    # not a git checkout (e.g. an unpacked archive): every file outside runtime folders
    return [p for p in ROOT.rglob("*") if p.is_file() and not _runtime(p.relative_to(ROOT))]


def _runtime(rel: Path) -> bool:
    return any(d in SKIP_DIRS or d.endswith(".egg-info") for d in rel.parts[:-1])


def _text_files() -> list[Path]:
    return [p for p in _tracked_files() if p.suffix in TEXT_SUFFIXES or p.name == "Makefile"]


def test_no_reference_outside_the_repository():
    offenders = []
    for path in _text_files():
        if path.resolve() == THIS:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if any(bad in line for bad in FORBIDDEN):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not offenders, "references outside the repository:\n" + "\n".join(offenders)


def test_methods_section_references_exist():
    methods = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^## (\d+)\.", methods, flags=re.M))
    assert {"1", "2", "3"} <= sections
    pattern = re.compile(r"docs/methods\.md (?:§|section )(\d+)")
    cited = {}
    for path in _text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number in pattern.findall(text):
            cited.setdefault(number, path.relative_to(ROOT))
    assert cited, "nothing cites docs/methods.md"
    missing = {n: str(p) for n, p in cited.items() if n not in sections}
    assert not missing, f"cited sections not in docs/methods.md: {missing}"


def test_emps_records_are_shipped_tracked_and_load():
    tracked = {p.relative_to(ROOT).as_posix() for p in _tracked_files()}
    for path in (EMPS_DEFAULT, EMPS_PULSES_DEFAULT, EMPS_DEFAULT.parent / "README.md"):
        assert path.is_file(), path
        assert path.resolve().is_relative_to(ROOT), f"{path} lies outside the repository"
        if (ROOT / ".git").exists():
            assert path.relative_to(ROOT).as_posix() in tracked, f"{path} is not tracked by git"
    for path in (EMPS_DEFAULT, EMPS_PULSES_DEFAULT):
        frame = load_emps(path, decimate=10)
        assert len(frame) == 2485
        assert {"t_s", "torque_Nm", "velocity_rad_s", "position_rad"} <= set(frame.columns)


@pytest.mark.parametrize("name", ["data/emps/DATA_EMPS.mat", "data/nist_strd/x.dat"])
def test_shipped_data_folders_are_not_ignored(name):
    git = shutil.which("git")
    if not (git and (ROOT / ".git").exists()):
        pytest.skip("not a git checkout")
    ignored = subprocess.run([git, "check-ignore", "-q", name], cwd=ROOT, check=False)
    assert ignored.returncode == 1, f"{name} is ignored by .gitignore"

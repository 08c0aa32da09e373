"""Where a result came from: the project's commit (tags on every run and registered model)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_commit(cwd: Path | None = None) -> str:
    """The project's current commit (with `+dirty` if the tree has changes), or `unknown`."""
    root = cwd or Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("+dirty" if dirty else "")) if sha else "unknown"

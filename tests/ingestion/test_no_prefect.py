"""The core runs without Prefect and MLflow: importing every module loads neither (also not
through `schemas` or `methods`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_imports_neither_prefect_nor_mlflow() -> None:
    modules = sorted(p.stem for p in (ROOT / "ingestion").glob("*.py") if p.stem != "__init__")
    assert {"job", "run", "readers", "rules", "ledger", "layout", "results"} <= set(modules)
    code = (
        "import sys\n"
        + "".join(f"import ingestion.{m}\n" for m in modules)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('prefect', 'mlflow', 'tasks', 'flows', 'dask'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""

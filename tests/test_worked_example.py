"""The README's worked example (a lab's own model and table, `examples/spring`) runs as written
from a fresh shell: the block is taken from the README, every line run by bash with the
virtualenv's `bin` on the PATH, in a copy of the example folder (nothing is written into the
repository). Oracles: the table is measured on a stiffening spring (k = 120 N/um, r = 0.8,
c = 1.5e-7 um/N^2), so the linear model must be rejected, the stiffening one must pass and
recover k within 4 standard errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "press.md"  # the press guide holds the worked example


def worked_example_block() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## Your own model (examples/spring)") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.slow
def test_the_readme_worked_example_runs_as_written(tmp_path: Path) -> None:
    lines = worked_example_block()
    assert lines[0] == "cd examples/spring"
    work = tmp_path / "examples" / "spring"
    shutil.copytree(ROOT / "examples" / "spring", work, ignore=shutil.ignore_patterns("*.csv"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI")}
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "GREYLAB_HOME": str(tmp_path / "home"), "COLUMNS": "80"}  # fmt: skip
    outputs = []
    for line in lines[1:]:
        done = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True,
                              text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        outputs.append(done.stdout)
    assert "best: 11 = ['tip', 'lever']" in outputs[2]  # both probes: three parameters, two sensors
    assert "StiffeningSpring: most parameters" in outputs[2]
    compare = outputs[4]  # the chosen columns of both model runs
    assert (
        "spring:Spring" in compare and "spring:StiffeningSpr" in compare and "stderr.k" in compare
    )

    # the same study as JSON: the verdicts and the estimate of k
    detect = next(line for line in lines if "press detect" in line)
    done = subprocess.run(["bash", "-c", detect + " --json"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    models = {m["model"]: m for m in json.loads(done.stdout)["verdicts"]}
    assert models["spring:Spring"]["rejected"] is True
    stiff = models["spring:StiffeningSpring"]
    assert stiff["rejected"] is False
    k, se = stiff["parameters"]["k"], stiff["standard_errors"]["k"]
    assert abs(k - 120.0) <= 4 * se, (k, se)

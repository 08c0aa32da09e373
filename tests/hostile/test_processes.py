"""Modules in the working folder never run inside greylab's processes (issue 28, item 2).

A `uvicorn.py`, `json.py`, `numpy.py`, `typing.py` (and `asyncio.py`, `socket.py`, `pickle.py`,
which a spawned Dask worker imports first) next to the lab's table each write a marker file
when imported. `greylab press detect` run from that folder starts a temporary Prefect server
(`runtime.server_guard`) and, with `--runner dask`, spawned worker processes: no marker may
appear. A plugin the command names in that folder is still found (only then, and last on the
path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GREYLAB = Path(sys.executable).parent / "greylab"  # the console script users run
SHADOWED = ("uvicorn", "json", "numpy", "typing", "asyncio", "socket", "pickle")


def _shadow_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in SHADOWED:
        (folder / f"{name}.py").write_text(
            "import os\n"
            f"open(os.path.join({str(folder)!r}, 'MARKER_{name}'), 'a').write('x')\n"
            f"raise ImportError('shadow {name} imported')\n"
        )
    return folder


def _run(folder: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GREYLAB_HOME": str(home)}
    for key in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "PREFECT_HOME", "PYTHONPATH"):
        env.pop(key, None)
    return subprocess.run(
        [str(GREYLAB), *args], cwd=folder, env=env, capture_output=True, text=True, timeout=400
    )


def _markers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("MARKER_*"))


@pytest.mark.integration
@pytest.mark.usefixtures("own_prefect_server")  # its temporary server
def test_press_detect_from_a_folder_of_shadow_modules_imports_none_of_them(tmp_path: Path) -> None:
    folder = _shadow_folder(tmp_path / "lab")
    done = _run(folder, tmp_path / "home", "press", "detect", "--model", "M1", "--tests", "3",
                "--json")  # fmt: skip
    assert _markers(folder) == [], done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.integration
@pytest.mark.usefixtures("own_prefect_server")  # its temporary server
def test_dask_workers_and_a_plugin_from_the_folder_import_no_shadow_module(tmp_path: Path) -> None:
    """The named plugin (`spring:Spring`, a file in the folder) is found by the CLI and by the
    spawned Dask workers, while the folder's `pickle.py`/`socket.py` are not imported."""
    folder = _shadow_folder(tmp_path / "lab")
    maker = tmp_path / "maker"  # make_table.py writes next to itself
    maker.mkdir()
    for name in ("spring.py", "make_table.py"):
        shutil.copy(ROOT / "examples" / "spring" / name, maker / name)
    shutil.copy(maker / "spring.py", folder / "spring.py")
    table = subprocess.run(
        [sys.executable, str(maker / "make_table.py")],
        cwd=maker, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    for name in ("spring.csv", "spring.sensors.csv"):
        shutil.move(str(maker / name), folder / name)
    done = _run(folder, tmp_path / "home", "press", "detect", "--data", "spring.csv", "--sheet",
                "spring.sensors.csv", "--model", "spring:Spring", "--tests", "2", "--runner",
                "dask", "--workers", "2", "--json")  # fmt: skip
    assert _markers(folder) == [], done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_temporary_server_starts_with_safe_path_and_without_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.server_guard import _GuardedSubprocess

    seen: dict[str, Any] = {}

    class FakeSubprocess:
        def Popen(self, args: list[str], **kwargs: Any) -> None:
            seen.update(args=args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", str(tmp_path), "/opt/site"]))
    _GuardedSubprocess(FakeSubprocess()).Popen(
        [sys.executable, "-m", "uvicorn", "--port", "1"], env={**os.environ, "X": "1"}
    )
    assert seen["args"][1:4] == ["-P", "-m", "runtime.server_guard"]
    assert seen["env"]["PYTHONSAFEPATH"] == "1" and seen["env"]["X"] == "1"
    assert seen["env"]["PYTHONPATH"] == "/opt/site"  # the working folder and "" are gone


def test_the_cli_exports_safe_path_to_every_child_process(tmp_path: Path) -> None:
    """The CLI's start sets PYTHONSAFEPATH (inherited by spawned Dask workers, Prefect's
    `python -m prefect.engine` runs of `greylab serve`, any `python -m` child)."""
    code = (
        "import os, sys\nsys.argv = ['greylab', '--help']\nfrom flows import cli\n"
        "cli._start(None)\n"
        "print(os.environ.get('PYTHONSAFEPATH'))\n"
    )
    env = {**os.environ, "GREYLAB_HOME": str(tmp_path / "home")}
    env.pop("PYTHONSAFEPATH", None)
    probe = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "1"


def test_a_flow_run_sets_safe_path_for_its_children_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.runners import safe_child_path

    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    with safe_child_path():
        assert os.environ["PYTHONSAFEPATH"] == "1"
    assert "PYTHONSAFEPATH" not in os.environ  # an in-process caller's environment is kept


def test_a_named_plugin_folder_is_appended_to_sys_path_not_exported_to_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`PYTHONPATH` entries come before the standard library in a child process: exporting
    the folder there let its `pickle.py` run in every Dask worker."""
    from flows.cli_common import allow_typed_models
    from models import registry

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(registry.ALLOWED_ENV, "")
    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    allow_typed_models(["spring:Spring"])
    assert sys.path[-1] == str(tmp_path)
    assert "PYTHONPATH" not in os.environ

"""Native simulators (`models.drivetrain.jit`): whichever C compiler builds them, the numbers
are the interpreted function's; a failing compiler gives way to the next, then to the
interpreter; the disk cache keys on the compiler, so two compilers never share a library."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.drivetrain import jit, reference_recording
from models.drivetrain.kit import assemble

simulate_module = importlib.import_module("models.drivetrain.simulate")
STRUCTURE = ["two_mass", "coulomb", "viscous", "stribeck"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GREYLAB_JIT_CACHE", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    return tmp_path


def _jacobian(**options: Any) -> tuple[bool, np.ndarray, np.ndarray]:
    u = reference_recording(duration=0.2)["torque_Nm"].to_numpy()
    model = assemble(STRUCTURE)
    sim = simulate_module.compile_simulator(model, u.size, 1e-3, **options)
    p = np.array([s.nominal for s in model.specs]) * 1.1
    y, jac = sim.simulate_with_jacobian(p, u, 0.0)
    return sim.native, y, jac


@pytest.mark.parametrize("compiler, opt", [("cc", "-O0"), ("tcc", "-O0"), ("cc", "-O1")])
def test_every_compiler_gives_the_interpreted_numbers(
    compiler: str, opt: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    monkeypatch.setenv("CC", compiler)
    native, y, jac = _jacobian(jit=True, opt=opt)
    _, y0, jac0 = _jacobian(jit=False)
    assert native
    np.testing.assert_allclose(y, y0, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(jac, jac0, rtol=1e-10, atol=1e-12)


def test_the_default_order_prefers_tcc_and_ends_with_cc(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert jit.compilers()[-1] == "cc"
    assert ("tcc" in jit.compilers()) == (shutil.which("tcc") is not None)
    assert jit.compilers("-O1")[0] == "cc"  # tcc does not optimise: last resort there
    monkeypatch.setenv("CC", "my-cc")
    assert jit.compilers() == jit.compilers("-O1") == ["my-cc"]


def test_auto_optimises_only_heavy_simulators() -> None:
    limit, level = simulate_module.OPTIMISE_WORK, simulate_module.optimisation
    # the paper's reference: 2001 samples, n_sub <= 2, at most 8 states and 18 parameters
    assert level("auto", 2, 2001, 8, 18) == "-O0"
    # EMPS at 100 Hz: a two-mass model with backlash (n_sub 32) is heavy, one mass is not
    assert level("auto", 32, 2485, 5, 7) == "-O1"
    assert level("auto", 9, 2485, 2, 4) == "-O0"
    assert level("auto", 1, limit + 1, 1, 0) == "-O1"
    assert level("auto", 1, limit, 1, 0) == "-O0"
    assert level("-O2", 1, 10, 1, 1) == "-O2"


def test_a_failing_compiler_gives_way(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jit, "compilers", lambda opt: ["/nonexistent/cc", "false", "cc"])
    native, _y, _jac = _jacobian(jit=True)
    assert native
    libraries = list(cache.glob("*.so"))
    assert len(libraries) == 1 and not list(cache.glob("*.tmp")) and not list(cache.glob("*.c"))
    # no compiler at all: the interpreted function, same numbers, nothing half-written left
    monkeypatch.setattr(jit, "compilers", lambda opt: ["false"])
    for lib in libraries:
        lib.unlink()
    native, y, _jac = _jacobian(jit=True)
    assert not native and np.all(np.isfinite(y))
    assert not list(cache.iterdir())


def test_a_crafted_compiler_name_is_not_run_by_a_shell(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # $CC is one program name, never a shell command line: nothing runs, nothing is written,
    # and the simulator falls back to the interpreted function with the same numbers
    marker = tmp_path / "pwned"
    monkeypatch.setenv("CC", f"cc; touch {marker}")
    for opt in ("-O0", "-O1"):
        native, y, _jac = _jacobian(jit=True, opt=opt)
        assert not native and np.all(np.isfinite(y))
    assert not marker.exists() and not list(cache.glob("*.so"))

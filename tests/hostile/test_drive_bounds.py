"""Bounded work in the drive study (issue 28, items 1 and 9): a recording that does not excite
the drive is refused by name before any search, every simulation's cost is estimated and
refused beyond the machine's limits before anything is allocated (substeps, samples, work),
and user-caused numeric failures (values x1e300, t_s in ns, f_tanh 1e308, min_substeps 1e9,
a spec without kind) exit 2 naming the field.

Cases that allocated gigabytes before the fix run in a subprocess under `RLIMIT_AS` (4 GiB)
and a timeout, so a regression fails the test instead of taking the machine's memory."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from methods.errors import InputError
from models import budget
from models.drivetrain import reference_recording

ROOT = Path(__file__).resolve().parents[2]
CAP_BYTES = 4 * 2**30


def _capped() -> None:  # in the child, before exec: at most 4 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def _limited(
    args: list[str], home: Path, *, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python args...` from the project folder under RLIMIT_AS and a timeout."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GREYLAB_MAX_")}
    environ |= {"GREYLAB_HOME": str(home / "home"), "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("MLFLOW_TRACKING_URI", None)  # PREFECT_API_URL: the shared test server
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=environ, preexec_fn=_capped,
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _cli(home: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _limited(["-c", "import sys; from flows.cli import main; sys.exit(main())", *argv],
                    home, env=env)  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return reference_recording()


def _write(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


# -- item 1: a recording that does not excite the drive ---------------------------------------
def test_constant_torque_identify_is_refused_by_name_before_any_work(reference, tmp_path) -> None:
    """The issue's case: torque 0.5 everywhere, population 4 x 1 generation - killed by the
    kernel at 24 GB before (exit 2 'out of memory' only under a ulimit)."""
    data = _write(reference.assign(torque_Nm=0.5), tmp_path / "const.csv")
    for preset in ("data", "reference"):
        done = _cli(tmp_path, "drive", "identify", "--data", str(data), "--population", "4",
                    "--generations", "1", "--preset", preset)  # fmt: skip
        assert done.returncode == 2, done.stderr[-2000:]
        assert "'torque_Nm' is constant (0.5 in every row)" in done.stderr
        assert "does not excite the drive" in done.stderr and str(data) in done.stderr
        assert "out of memory" not in done.stderr and "Traceback" not in done.stderr


def test_near_constant_torque_is_refused_by_name(reference) -> None:
    from flows.drive.inputs import recording_scales

    frame = reference.assign(torque_Nm=0.5 + 1e-9 * np.sin(np.arange(len(reference))))
    with pytest.raises(InputError, match=r"lab.csv: column 'torque_Nm' is near-constant"):
        recording_scales(frame, source="lab.csv")


def test_a_scale_fit_that_explains_nothing_is_refused(reference) -> None:
    """Torque that is pure noise (uncorrelated with the motion): the best cutoff's fit reached
    R^2 0.3-0.44 by chance; below 0.5 nothing is explained."""
    from flows.drive.inputs import recording_scales

    rng = np.random.default_rng(0)
    frame = reference.assign(torque_Nm=rng.normal(size=len(reference)))
    with pytest.raises(InputError, match=r"lab.csv: scales from the data: .* explains R\^2 = "):
        recording_scales(frame, source="lab.csv")


def test_an_inertia_of_zero_in_effect_is_refused() -> None:
    """A significant but negligible inertia (the constant-torque fit gave J 1.2e-17): boxes on
    it would ask for ~1e12 substeps per sample."""
    from models.drivetrain.scales import Scales

    values = {"J": 1e-15, "f_v": 0.01, "M_C": 0.2, "offset": 0.0}
    stderr = {"J": 1e-18, "f_v": 1e-4, "M_C": 1e-3, "offset": 1e-4}
    scales = Scales(values, stderr, r2=0.99, n_used=1000, dt=1e-3, v_max=10.0, u_rms=0.5,
                    a_rms=50.0)  # fmt: skip
    with pytest.raises(InputError, match="zero in effect"):
        scales.nominals()
    insignificant = Scales({**values, "J": 1e-3}, {**stderr, "J": 1e-3}, r2=0.99, n_used=1000,
                           dt=1e-3, v_max=10.0, u_rms=0.5, a_rms=50.0)  # fmt: skip
    with pytest.raises(InputError, match="not distinguishable from 0"):
        insignificant.nominals()


# -- the cost of a simulation, before allocating ----------------------------------------------
def test_a_stiff_box_is_refused_before_the_simulator_is_built(tmp_path) -> None:
    """Inertias of 1e-18 (as centred on the constant-torque fit): the step-size rule asks for
    ~1e15 substeps per sample; refused from the estimate, under a 4 GiB cap."""
    code = (
        "from models.drivetrain import get_simulator\n"
        "from methods.errors import InputError\n"
        "try:\n"
        "    get_simulator(['two_mass', 'coulomb', 'viscous'], 2001, 1e-3,\n"
        "                  nominals={'J1': 1e-18, 'J2': 1e-18})\n"
        "except InputError as exc:\n"
        "    print('REFUSED', exc)\n"
    )
    done = _limited(["-c", code], tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "REFUSED" in done.stdout, done.stdout[-500:]
    assert "GREYLAB_MAX_DRIVE_SUBSTEPS" in done.stdout and "rho = " in done.stdout
    assert "J1 5e-19..2e-18" in done.stdout  # the box behind the stiffness is named


def test_the_cost_estimate_and_the_work_limit(monkeypatch) -> None:
    from models.drivetrain import get_simulator

    cost = budget.SimulationCost(samples=2001, substeps=3, states=4, parameters=8)
    assert cost.work == 3 * 2000 * 4
    assert cost.bytes == 2001 * (budget.BYTES_PER_SAMPLE + 8 * 4 * 9) + 96 * 3
    monkeypatch.setenv(budget.MAX_WORK, "1000")
    with pytest.raises(
        budget.LimitError, match=r"exceeds the limit of 1,000 .*GREYLAB_MAX_DRIVE_WORK"
    ):
        get_simulator(["two_mass", "viscous"], 2001, 1e-3)


def test_a_cached_simulator_is_checked_against_the_limits_too(monkeypatch) -> None:
    """The limits hold for every simulator asked for: one built before (by another test or an
    earlier search in this process, under other limits) is refused as a new one would be."""
    from models.drivetrain import get_simulator

    monkeypatch.delenv(budget.MAX_WORK, raising=False)
    monkeypatch.delenv(budget.MAX_SAMPLES, raising=False)
    built = get_simulator(["one_mass", "viscous"], 301, 1e-3)
    assert get_simulator(["one_mass", "viscous"], 301, 1e-3) is built  # from the cache
    monkeypatch.setenv(budget.MAX_WORK, "100")
    with pytest.raises(
        budget.LimitError, match=r"exceeds the limit of 100 .*GREYLAB_MAX_DRIVE_WORK"
    ):
        get_simulator(["one_mass", "viscous"], 301, 1e-3)
    monkeypatch.delenv(budget.MAX_WORK)
    monkeypatch.setenv(budget.MAX_SAMPLES, "100")
    with pytest.raises(budget.LimitError, match=r"301 samples exceed the limit of 100"):
        get_simulator(["one_mass", "viscous"], 301, 1e-3)


def test_the_default_sample_limit_refuses_the_issues_validate(monkeypatch) -> None:
    """1.999M samples peaked at 17 GB in `drive validate`; the default refuses them by the
    estimate, and the variable raises the limit."""
    monkeypatch.delenv(budget.MAX_SAMPLES, raising=False)
    with pytest.raises(budget.LimitError, match=r"1,999,000 samples exceed .*GREYLAB_MAX_DRIVE"):
        budget.check_samples(1_999_000, "big.csv")
    monkeypatch.setenv(budget.MAX_SAMPLES, "2000000")
    budget.check_samples(1_999_000, "big.csv")
    monkeypatch.setenv(budget.MAX_SAMPLES, "-3")
    with pytest.raises(InputError, match="GREYLAB_MAX_DRIVE_SAMPLES='-3': expected a positive"):
        budget.check_samples(10, "x.csv")


def test_identify_refuses_a_recording_beyond_the_sample_limit(
    reference, tmp_path, monkeypatch, capsys
) -> None:
    from flows.cli import main

    data = _write(reference, tmp_path / "long.csv")
    monkeypatch.setenv(budget.MAX_SAMPLES, "1000")
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    argv = ["drive", "identify", "--data", str(data), "--population", "4", "--generations", "1"]
    assert main(argv) == 2
    assert f"{data}: 2,001 samples exceed the limit of 1,000" in capsys.readouterr().err


# -- item 9: numeric input that failed inside the numerics (exit 1) now exits 2 by name ---------
def test_values_times_1e300_are_refused_by_column(reference, tmp_path, capsys) -> None:
    """Was `internal error: LinAlgError: SVD did not converge` (exit 1)."""
    from flows.cli import main

    big = reference.copy()
    big[["torque_Nm", "velocity_rad_s", "position_rad"]] *= 1e300
    data = _write(big, tmp_path / "big.csv")
    argv = ["drive", "identify", "--data", str(data), "--population", "4", "--generations", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "column 'torque_Nm' at row" in err and "at most 1e+15" in err


def test_t_s_in_nanoseconds_is_refused_by_column(reference, tmp_path) -> None:
    """t_s in ns: a sample time of 1e6 s asked the reference boxes for 2e9 substeps (out of
    memory) and gave 'Singular matrix' elsewhere."""
    data = _write(reference.assign(t_s=reference["t_s"] * 1e9), tmp_path / "ns.csv")
    done = _cli(tmp_path, "drive", "identify", "--data", str(data), "--preset", "reference",
                "--population", "4", "--generations", "1")  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "column 't_s' at row 1" in done.stderr and "t_s is in seconds" in done.stderr


# -- drive validate: a model spec from a shared store ---------------------------------------------
@pytest.fixture(scope="module")
def product(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A drive model product as greylab saves it (reference structure, its true parameters)."""
    from models.drivetrain.product import DriveModel
    from products.pyfunc import saved_pyfunc

    root = tmp_path_factory.mktemp("drive-product")
    structure = ["two_mass", "coulomb", "viscous"]
    parameters = {"J1": 0.01, "J2": 0.02, "c1": 50.0, "d1": 0.05, "M_C": 0.2, "f_v": 0.01}
    model = DriveModel(structure=tuple(structure), parameters=parameters, dt=1e-3)
    recording = reference_recording(structure, parameters, duration=0.5)
    with saved_pyfunc({"kind": "drive", "model": model.to_dict()},
                      input_example=recording.head(50), metadata={}) as folder:  # fmt: skip
        shutil.copytree(folder, root / "model")
    data = _write(recording, root / "new.csv")
    return {"model": root / "model", "data": data}


def _broken(product: dict[str, Any], where: Path, change: dict[str, Any]) -> Path:
    folder = where / "model"
    shutil.copytree(product["model"], folder)
    path = folder / "artifacts" / "spec.json"
    spec = json.loads(path.read_text())
    for key, value in change.items():
        if key == "kind":
            spec.pop("kind")
        else:
            spec["model"][key] = value
    path.write_text(json.dumps(spec))
    return folder


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"min_substeps": 1e9}, "'min_substeps'"),  # hung / allocated before
        ({"f_tanh": 1e308}, "f_tanh 1e+308"),  # LinAlgError: Array must not contain infs
        ({"kind": None}, "kind"),  # KeyError before round 2
    ],
    ids=["min_substeps-1e9", "f_tanh-1e308", "no-kind"],
)
def test_a_hostile_model_spec_exits_2_naming_the_field(product, tmp_path, change, words) -> None:
    folder = _broken(product, tmp_path, change)
    done = _cli(tmp_path, "drive", "validate", "--model", str(folder), "--data",
                str(product["data"]), "--no-track")  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert words in done.stderr and "Traceback" not in done.stderr
    assert "internal error" not in done.stderr and "out of memory" not in done.stderr


def test_validate_refuses_a_recording_beyond_the_sample_limit(product, tmp_path) -> None:
    done = _cli(tmp_path, "drive", "validate", "--model", str(product["model"]), "--data",
                str(product["data"]), "--no-track", GREYLAB_MAX_DRIVE_SAMPLES="100")  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "501 samples exceed the limit of 100" in done.stderr
    assert "GREYLAB_MAX_DRIVE_SAMPLES" in done.stderr


# -- drive simulate: true values and noise are named, not reported as a diverged simulation ---
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--set", "J1=0"], "--set J1=0.0: J1 is a physical magnitude and must be > 0"),
        (["--set", "J1=-1"], "--set J1=-1.0: J1 is a physical magnitude"),  # was exit 0
        (["--set", "f_v=nan"], "--set f_v=nan: a true value must be a finite number"),
        (["--set", "c1=1e308"], "--set c1=1e+308: a true value must be a finite number"),
        (["--noise", "1e308"], "noise must be at most 1e+15"),  # wrote inf before, exit 0
    ],
)
def test_drive_simulate_names_an_unusable_true_value(tmp_path, capsys, argv, words) -> None:
    from flows.cli import main

    out = tmp_path / "s.csv"
    assert main(["drive", "simulate", "--out", str(out), *argv]) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_the_simulated_recordings_limit_is_the_schemas() -> None:
    from models.drivetrain import excitation
    from schemas import drive

    assert excitation.MAX_MAGNITUDE == drive.MAX_MAGNITUDE
    frame = reference_recording(["two_mass", "gravity"], {"M_G": -0.1})  # M_G may be < 0
    assert np.isfinite(frame["velocity_rad_s"]).all()


def test_the_search_itself_refuses_a_constant_torque(reference) -> None:
    """The worker's route (a campaign's `--trigger-studies`, a dashboard run with a preset):
    the search checks the recording it is given, whatever the caller checked."""
    from models.drivetrain.gp import StructureSearch

    search = StructureSearch(population=2, generations=1)
    with pytest.raises(InputError, match=r"'torque_Nm' is constant \(0.5 in every row\)"):
        search.fit(reference.assign(torque_Nm=0.5))


@pytest.mark.parametrize(
    ("nominal", "words"),
    [
        ("j1=0.02", "unknown parameter(s) ['j1']; known: J1, J2"),  # a typo was ignored, exit 0
        ("J1=1e300", "J1=1e+300: a nominal must be finite, at most 1e+15"),
    ],
)
def test_identify_names_an_unusable_nominal(capsys, nominal, words) -> None:
    from flows.cli import main

    argv = ["drive", "identify", "--population", "2", "--generations", "1", "--nominal", nominal]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "--nominal" in err


@pytest.mark.parametrize(
    ("column", "value", "preset", "words"),
    [
        ("velocity_rad_s", 1e-300, "data", "'velocity_rad_s' is vanishing (it peaks at |1e-300|"),
        ("velocity_rad_s", 1e-300, "reference", "'velocity_rad_s' is vanishing"),
        ("velocity_rad_s", 0.0, "reference", "'velocity_rad_s' is constant (0 in every row)"),
        ("torque_Nm", 3e-300, "data", "'torque_Nm' is vanishing (it peaks at |3e-300|"),
    ],
    ids=["velocity-1e-300-data", "velocity-1e-300-reference", "still", "torque-3e-300"],
)
def test_a_vanishing_column_is_refused_by_name(
    reference, tmp_path, column, value, preset, words
) -> None:
    """Velocities of 1e-300 made the scale fit's columns underflow to 0 and LAPACK loop for
    ever ('DLASCL parameter number 4 had an illegal value'); with the reference preset the
    search ended in 'internal error: ValueError: array must not contain infs or NaNs'."""
    frame = reference.copy()
    frame[column] = value * np.sin(np.arange(len(frame))) if value else 0.0
    data = _write(frame, tmp_path / "small.csv")
    done = _cli(tmp_path, "drive", "identify", "--data", str(data), "--population", "2",
                "--generations", "1", "--preset", preset)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert words in done.stderr and "does not excite the drive" in done.stderr

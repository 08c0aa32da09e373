"""`greylab drive identify` ends when its work ends (issue 13): Prefect's queued logs and
events are sent before the temporary API server for Dask workers stops. Left to interpreter
exit they met the stopped server: "Error logging to API - All connection attempts failed" and
a wait of about 70 s after the result was printed (measured before the fix: output at 32 s,
exit at 100 s; after: 2-3 s apart). The bound below is far from both, so load cannot flip it.
The evidence's rival table is left out (`--no-rivals`): identifying the answer's neighbours
took most of this test's time and is not what it checks (the rivals of a search on a Dask
cluster: tests/integration/test_press_flow.py). The thread run also leaves out the scales
from the data (`--preset reference`: the reference's own boxes; measured 58 -> 21 CPU s for
the command): the data preset's grid and final stage are not what it checks, and the Dask run
keeps them (the data preset's final stage on Dask workers runs nowhere else from the command
line; its scales on threads: tests/flows/test_drive_scales.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

GRACE_S = 15.0


@pytest.mark.slow
@pytest.mark.usefixtures("own_prefect_server")  # exits with its temporary server
@pytest.mark.parametrize(("runner", "preset"), [("dask", "data"), ("thread", "reference")],
                         ids=["dask", "thread"])  # fmt: skip
def test_drive_identify_exits_within_seconds_of_its_result(
    runner: str, preset: str, tmp_path: Path
) -> None:
    from models.drivetrain import reference_recording

    data = tmp_path / "ref.csv"
    reference_recording().to_csv(data, index=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))}
    env["GREYLAB_HOME"] = str(tmp_path / "home")
    greylab = str(Path(sys.executable).parent / "greylab")
    args = [greylab, "drive", "identify", "--data", str(data), "--population", "4",
            "--generations", "2", "--seed", "0", "--json", "--runner", runner,
            "--no-rivals", "--preset", preset]  # fmt: skip
    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr:
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, env=env)
        assert process.stdout is not None
        last_output = None
        while os.read(process.stdout.fileno(), 65536):  # b"" at end of file
            last_output = time.monotonic()
        process.wait(timeout=600)
        ended = time.monotonic()
    err = log.read_bytes()
    assert process.returncode == 0, err.decode()[-2000:]
    assert last_output is not None
    print(f"{runner}: exit {ended - last_output:.1f} s after the result (pytest -s shows this)")
    assert ended - last_output < GRACE_S, f"exited {ended - last_output:.1f} s after its result"
    assert b"Error logging to API" not in err

"""`benchmarks/drive_work_rate.py` at a tiny size: the work it reports is what the fits'
simulations did, tallied independently (every simulation's `SimulationCost.work`, a Jacobian
`1 + n_p` times, counted where the simulators are called; the step-doubling checks of the
substep count are not charged), and its figures are written."""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks import drive_work_rate
from models.drivetrain import reference_recording
from models.drivetrain.simulate import CompiledSimulator, simulation_cost

RIGID = ("one_mass", "coulomb", "viscous")


def test_the_work_is_the_simulations_and_the_figures_are_written(tmp_path: Path, monkeypatch):
    tally: list[float] = []
    for name, times in (("simulate", lambda p: 1), ("simulate_with_jacobian", lambda p: 1 + p)):
        real = getattr(CompiledSimulator, name)

        def counted(self, p, *args, _real=real, _times=times, **kwargs):
            cost = simulation_cost(self.model, self.n_samples, self.dt, self.n_sub).work
            tally.append(cost * _times(len(p)))
            return _real(self, p, *args, **kwargs)

        monkeypatch.setattr(CompiledSimulator, name, counted)
    rec = reference_recording(list(RIGID), duration=1.2)
    tally.clear()
    work, wall, stopped = drive_work_rate.measured(rec, RIGID)
    second = sum(tally[len(tally) // 2 :])  # the two identifications are alike: the second
    assert not stopped and math.isfinite(wall) and wall > 0
    # every charge a simulation's; all but the substep count's step-doubling checks charged
    # (a Jacobian charged as one simulation would leave about 40 % here)
    assert 0.8 * second <= work <= second, (work, second)
    monkeypatch.setattr(drive_work_rate, "CASES", (("tiny", lambda: rec, RIGID),))
    out = tmp_path / "rate.json"
    assert drive_work_rate.main(["--json", str(out)]) == 0
    rows = {r["key"]: r["values"] for r in json.loads(out.read_text())["rows"]}
    assert rows["slowest"] == rows["median"] and rows["spread"] == [1.0]
    assert rows["slowest"][0] > 0

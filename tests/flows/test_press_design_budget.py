"""The press flow designs under the study's budget (issue 15): the sensor sheet's cost column
and `budget` / `max_sensors` reach the design, the design that the tests use is the
affordable optimum (oracle: every subset of the 3 twin sensors enumerated by hand), and MLflow
records how it was found."""

from __future__ import annotations

import itertools
from pathlib import Path

import methods
from models.press import M3, simulate_press

COSTS = {"D_vertical": 5.0, "F_horizontal": 1.0, "B0_vertical": 1.0}


def test_the_flow_designs_within_the_sheet_costs(private_prefect: None, tmp_path: Path) -> None:
    from flows.press.flow import PressStudy, run_press_study
    from tracking.mlflow_tracker import Tracker

    table, sheet = simulate_press(truth="M3", seed=1)
    table.to_csv(tmp_path / "lab.csv", index=False)
    sheet.assign(cost=sheet["sensor"].map(COSTS)).to_csv(tmp_path / "sheet.csv", index=False)
    study = PressStudy(data=str(tmp_path / "lab.csv"), sensor_sheet=str(tmp_path / "sheet.csv"),
                       models=["M3"], n_sensors=None, budget=2.0, n_tests=3, cache=False)  # fmt: skip
    result = run_press_study(study)

    # oracle: the E-best identifiable subset among those costing at most 2
    sigma = dict(zip(sheet.sensor, sheet.sigma_um))
    full = methods.sensor_design(M3, methods.correct_to_setpoints(table), n_sensors=None,
                                 sigma=sigma).table.set_index("sensors")  # fmt: skip
    names = list(M3.sensors)
    affordable = [",".join(s) for k in (1, 2, 3) for s in itertools.combinations(names, k)
                  if sum(COSTS[x] for x in s) <= 2.0]  # fmt: skip
    ok = full.loc[affordable][full.loc[affordable, "identifiable"].astype(bool)]
    assert list(result.sensors) == ok["E"].idxmin().split(",") == ["F_horizontal", "B0_vertical"]
    design = result.design
    assert design["search"]["budget"] == "cost <= 2" and design["best"]["cost"] == 2.0
    params = Tracker().client.get_run(result.parent_run_id).data.params
    assert params["design_budget"] == "cost <= 2" and params["design_method"] == "enumeration"

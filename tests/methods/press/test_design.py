from __future__ import annotations

import json
from typing import ClassVar

import numpy as np
import pytest

from methods import InputError, sensor_design
from models.press import M1, M2, M3


@pytest.mark.parametrize("model", [M1, M2, M3])
def test_press_design_reproduces_the_paper(twin_m3, model) -> None:
    table, sheet = twin_m3
    d = sensor_design(model, table, n_sensors=2, criterion="E", sigma=sheet)
    rows = d.table.set_index("code")
    # D and B0 see (k5, k7) only through one combination: rank-1 information
    assert not rows.loc["101", "identifiable"] and np.isinf(rows.loc["101", "E"])
    assert rows.loc["110", "identifiable"] and rows.loc["011", "identifiable"]
    assert d.best["code"] == "110"
    json.dumps(d.to_dict())
    assert "best: 110" in d.summary()


def test_all_sizes_and_no_data_design() -> None:
    d = sensor_design(M3, None, n_sensors=None, criterion="D")
    assert set(d.table["code"]) == {"100", "010", "001", "110", "101", "011", "111"}
    # one sensor sees the two stiffnesses through one combination only: rank 1
    assert not d.table.set_index("code").loc[["100", "010", "001"], "identifiable"].any()
    # more sensors never lose information (first-order, no residuals)
    rows = d.table.set_index("code")
    assert rows.loc["111", "D"] <= rows.loc["110", "D"]
    assert d.best["code"] == "111"


def test_bad_design_requests() -> None:
    with pytest.raises(InputError, match="n_sensors must lie between 1 and the 3"):
        sensor_design(M3, None, n_sensors=0)
    with pytest.raises(InputError, match="n_sensors"):
        sensor_design(M3, None, n_sensors=4)
    with pytest.raises(InputError, match="criterion"):
        sensor_design(M3, None, n_sensors=2, criterion="Z")


def test_design_without_data_takes_a_sensor_sheet_and_names_missing_sensors() -> None:
    import pandas as pd

    from methods import sensor_design
    from methods.errors import InputError
    from models.press import M3

    sheet = pd.DataFrame(
        {"sensor": ["D_vertical", "F_horizontal", "B0_vertical"], "sigma_um": [0.5, 0.4, 0.8]}
    )
    assert sensor_design(M3, None, n_sensors=2, sigma=sheet).best["code"] == "110"
    with pytest.raises(InputError, match=r"sigma lacks sensor\(s\) \['F_horizontal'"):
        sensor_design(M3, None, n_sensors=2, sigma={"D_vertical": 0.5})


class _Curved:
    """Three parameters read by two sensors: ``tip = F/k + c F^2``, ``lever = r F/k``. Each
    sensor reads the whole load scenario, so two sensors identify three parameters; ``tip``
    alone identifies (k, c) but never r, ``lever`` alone only the ratio r/k."""

    name = "curved"
    parameters: ClassVar = {"k": 100.0, "r": 1.0, "c": 0.0}
    bounds: ClassVar = {"c": (-1e-3, 1e-3)}
    sensors = ("tip", "lever")
    default_forces = np.linspace(0.0, 2000.0, 11)
    nominal_sigma: ClassVar = {"tip": 0.5, "lever": 0.5}

    def response(self, p, forces):
        import casadi as ca

        tip = forces / p[0] + p[2] * forces**2
        lever = p[1] * forces / p[0]
        if isinstance(forces, np.ndarray) and not isinstance(p, ca.SX):
            return np.column_stack([tip, lever])
        return ca.horzcat(tip, lever)


def test_fewer_sensors_than_parameters_are_judged_by_rank_not_by_count() -> None:
    d = sensor_design(_Curved(), None, n_sensors=None, criterion="E")
    rows = d.table.set_index("code")
    assert bool(rows.loc["11", "identifiable"])
    assert not rows.loc["10", "identifiable"] and not rows.loc["01", "identifiable"]
    assert d.best["code"] == "11"
    assert sensor_design(_Curved(), None, n_sensors=2).best["code"] == "11"


def test_a_one_parameter_model_gets_an_interval_figure() -> None:
    """`ellipsoid_figure` of a one-parameter fit: the band is the estimate +- sqrt(chi2_1)
    s.e. (= 1.96 s.e. at 95 %), no ellipse (which needs two parameters)."""
    import casadi as ca

    import methods
    from methods import fit_parameters
    from methods.press.plots import ellipsoid_figure
    from models.press import simulate_press

    class Stiff:
        name = "stiff"
        parameters: ClassVar = {"k5": 5000.0}
        sensors = ("D_vertical", "F_horizontal", "B0_vertical")

        def response(self, p, forces):
            return ca.horzcat(forces / p[0], forces / (2 * p[0]), forces / (3 * p[0]))

    table, sheet = simulate_press(truth="M1", seed=1)
    table = methods.correct_to_setpoints(table)
    fit = fit_parameters(Stiff(), table, sigma=dict(zip(sheet.sensor, sheet.sigma_um)))
    fig = ellipsoid_figure(fit)
    (ax,) = fig.axes
    band = ax.patches[0]  # axhspan: a rectangle, y in data coordinates
    low, high = band.get_y(), band.get_y() + band.get_height()
    se = float(np.sqrt(fit.covariance[0, 0]))
    assert abs((high - low) / 2 - 1.959964 * se) < 1e-3 * se
    assert ax.get_ylabel() == "k5"

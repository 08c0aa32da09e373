from __future__ import annotations

import json

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
    assert set(d.table["code"]) == {"110", "101", "011", "111"}
    # more sensors never lose information (first-order, no residuals)
    rows = d.table.set_index("code")
    assert rows.loc["111", "D"] <= rows.loc["110", "D"]
    assert d.best["code"] == "111"


def test_bad_design_requests() -> None:
    with pytest.raises(InputError, match="n_sensors"):
        sensor_design(M3, None, n_sensors=1)
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

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from methods import InputError, ResponseModel
from models.press import M1, M2, M3, SENSORS, PressModel, simulate_press
from models.registry import resolve_model

P = np.array([5400.0, 2800.0])


@pytest.mark.parametrize("model", [M1, M2, M3, PressModel("M2", estimate_friction=True)])
def test_numpy_and_casadi_responses_agree(model) -> None:
    q = model.default_forces
    p = np.r_[P, list(model.parameters.values())[2:]]
    ps, qs = ca.SX.sym("p", p.size), ca.SX.sym("q", q.size)
    f = ca.Function("h", [ps, qs], [model.response(ps, qs)])
    np.testing.assert_allclose(np.asarray(f(p, q)), model.response(p, q), rtol=1e-13)
    assert isinstance(model, ResponseModel) and model.response(p, q).shape == (29, 3)


def test_friction_models_make_the_expected_hysteresis() -> None:
    q = M1.default_forces
    same_force = [(j, 28 - j) for j in range(14)]  # loading step j and unloading step 28 - j
    for model, grows in ((M1, False), (M2, True), (M3, True)):
        h = model.response(P, q)
        gap = np.array([h[u, 0] - h[l, 0] for l, u in same_force])
        if grows:
            assert np.all(gap > 0)  # unloading displacement above loading: a loop
        else:
            np.testing.assert_allclose(gap, 0, atol=1e-12)
    # M3's play width is proportional to the load: zero-width limit is M1
    np.testing.assert_allclose(PressModel("M3", mu=0.0).response(P, q), M1.response(P, q))


def test_d_and_b0_share_one_stiffness_combination() -> None:
    ps = ca.SX.sym("p", 2)
    J = ca.Function("J", [ps], [ca.jacobian(ca.vec(M3.response(ps, M3.default_forces)), ps)])
    Jn = np.asarray(J(P)).reshape(3, 29, 2)  # vec is column-major: (sensor, step, p)
    d, f, b0 = Jn[0].sum(0), Jn[1].sum(0), Jn[2].sum(0)
    assert abs(d[0] * b0[1] - d[1] * b0[0]) < 1e-12 * np.abs(d).max() * np.abs(b0).max()
    assert abs(d[0] * f[1] - d[1] * f[0]) > 1e-2 * np.abs(d).max() * np.abs(f).max()


def test_twin_is_seeded_and_well_formed() -> None:
    t1, sheet = simulate_press("M2", seed=3, n_series=4)
    t2, _ = simulate_press("M2", seed=3, n_series=4)
    assert t1.equals(t2) and not t1.equals(simulate_press("M2", seed=4, n_series=4)[0])
    assert len(t1) == 4 * 29 * 3 and set(t1["sensor"]) == set(SENSORS)
    assert (t1["force_N"] >= 0).all() and list(sheet.columns) == ["sensor", "sigma_um"]


def test_registry() -> None:
    assert resolve_model("M3") is M3
    assert resolve_model("models.press:M2") is M2
    assert resolve_model("models.press:PressModel").friction == "M3"
    with pytest.raises(InputError, match=r"choose one of \['M1', 'M2', 'M3'\]"):
        resolve_model("M4")
    with pytest.raises(InputError, match="no attribute"):
        resolve_model("models.press:nothing")
    with pytest.raises(InputError, match="friction"):
        PressModel("M9")

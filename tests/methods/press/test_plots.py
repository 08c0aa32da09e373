from __future__ import annotations

import pytest

from methods import detect_model_uncertainty, fit_parameters, sensor_design
from methods.press import plots
from models.press import M3

pytest.importorskip("matplotlib")


def test_figures_render(twin_m3, tmp_path) -> None:
    table, sheet = twin_m3
    fit = fit_parameters(M3, table, sensors=["D_vertical", "F_horizontal"], sigma=sheet)
    det = detect_model_uncertainty(M3, table, n_tests=10, sensors=["D_vertical", "F_horizontal"])
    figs = [
        plots.ellipsoid_figure(fit, det),
        plots.hysteresis_figure(M3, table, fit),
        plots.design_figure(sensor_design(M3, table, n_sensors=None)),
    ]
    for k, fig in enumerate(figs):
        fig.savefig(tmp_path / f"f{k}.png")
        assert (tmp_path / f"f{k}.png").stat().st_size > 1000

"""Figures of the press study (matplotlib imported lazily, Agg backend; returns Figures)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from methods.press.data import to_cube
from methods.press.uncertainty.prediction import Z95


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def ellipsoid_figure(
    fit: Any, detection: Any | None = None, *, i: int = 0, j: int = 1, level: float = 0.95
):
    """2-D projection of the fit's confidence ellipsoid (parameters ``i``, ``j``) with the
    calibration and validation estimates of the tests of ``detection`` (if given). A
    one-parameter model gets its confidence interval instead (`interval_figure`)."""
    names = list(fit.parameters)
    if len(names) == 1:
        return interval_figure(fit, detection, level=level)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    if fit.identifiable:
        e = fit.ellipsoid(level)
        b = e.boundary_2d(i, j)
        ax.plot(b[:, 0], b[:, 1], "k-", label=f"{level:.0%} ellipsoid (all data)")
    ax.plot(fit.values[i], fit.values[j], "k+", ms=10, label="estimate (all data)")
    if detection is not None and len(detection.tests):
        t = detection.tests
        rej = t["rejected"].to_numpy(bool) if "rejected" in t else np.zeros(len(t), bool)
        for prefix, marker, lab in (("p_cal_", "o", "calibration"), ("p_val_", "x", "validation")):
            x, y = t[prefix + names[i]], t[prefix + names[j]]
            ax.scatter(x[~rej], y[~rej], marker=marker, s=14, alpha=0.6, label=lab)
            if rej.any():
                ax.scatter(x[rej], y[rej], marker=marker, s=18, c="red", label=lab + " (rejected)")
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    ax.set_title(f"{fit.model}: parameter estimates")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def interval_figure(fit: Any, detection: Any | None = None, *, level: float = 0.95):
    """The one-parameter counterpart of `ellipsoid_figure`: the confidence interval of the
    all-data estimate (a band) and the calibration and validation estimates per test."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    name = next(iter(fit.parameters))
    if fit.identifiable:
        e = fit.ellipsoid(level)  # one dimension: centre +- the semi-axis
        low, high = e.center[0] - e.semi_axes[0], e.center[0] + e.semi_axes[0]
        ax.axhspan(low, high, color="0.85", label=f"{level:.0%} interval (all data)")
    ax.axhline(fit.values[0], color="k", lw=1, label="estimate (all data)")
    if detection is not None and len(detection.tests):
        t = detection.tests
        rej = t["rejected"].to_numpy(bool) if "rejected" in t else np.zeros(len(t), bool)
        index = np.arange(1, len(t) + 1)
        for prefix, marker, lab in (("p_cal_", "o", "calibration"), ("p_val_", "x", "validation")):
            y = t[prefix + name].to_numpy(float)
            ax.scatter(index[~rej], y[~rej], marker=marker, s=14, alpha=0.6, label=lab)
            if rej.any():
                ax.scatter(
                    index[rej], y[rej], marker=marker, s=18, c="red", label=lab + " (rejected)"
                )
    ax.set_xlabel("test")
    ax.set_ylabel(name)
    ax.set_title(f"{fit.model}: parameter estimates")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def hysteresis_figure(
    model: Any, table: pd.DataFrame, fit: Any, *, sensors: Sequence[str] | None = None
):
    """Measured (all series) vs fitted load-displacement curves per sensor (top row; loading
    and unloading branches drawn separately so the hysteresis loop is visible) and the
    residuals measured - fitted in units of the sensor's sigma per step (bottom row: mean over
    the series with +-1 standard deviation, loading and unloading apart). A model that misses
    the hysteresis leaves residuals of opposite sign on the two branches."""
    plt = _plt()
    sensors = list(fit.sensors if sensors is None else sensors)
    data = to_cube(table, sensors)
    cols = [list(model.sensors).index(s) for s in sensors]
    h = np.asarray(model.response(fit.values, data.setpoints))[:, cols]
    fig, axes = plt.subplots(
        2, len(sensors), figsize=(4.2 * len(sensors), 6.4), squeeze=False,
        gridspec_kw={"height_ratios": [3, 2]}, sharex="col",
    )  # fmt: skip
    q_kN = data.setpoints / 1e3
    sigma = np.array([fit.sigma.get(s, np.nan) for s in sensors])
    residual = (data.z - h[None]) / sigma  # (n_M, n_q, n_S) in units of sigma
    for k, s in enumerate(sensors):
        ax, rax = axes[0, k], axes[1, k]
        for i in range(data.z.shape[0]):
            ax.plot(data.forces[i] / 1e3, data.z[i, :, k], ".", color="0.6", ms=3)
        for branch, style, lab in (
            (data.loading, "-", "loading"),
            (~data.loading, "--", "unloading"),
        ):
            idx = np.flatnonzero(branch)
            if idx.size and not branch.all():
                idx = np.r_[idx, idx[-1] + 1] if lab == "loading" else np.r_[idx[0] - 1, idx]
                idx = idx[(idx >= 0) & (idx < q_kN.size)]
            ax.plot(q_kN[idx], h[idx, k], style, label=f"{fit.model} {lab}")
            own = np.flatnonzero(branch)
            rax.errorbar(
                q_kN[own], residual[:, own, k].mean(axis=0), yerr=residual[:, own, k].std(axis=0),
                fmt="o" if lab == "loading" else "s", ms=3, capsize=2, label=lab,
            )  # fmt: skip
        ax.set_ylabel(f"{s} (um)")
        ax.legend(fontsize=7)
        rax.axhline(0.0, color="k", lw=0.8)
        rax.set_xlabel("process force (kN)")
        rax.set_ylabel("residual / sigma")
        rax.legend(fontsize=7)
    fig.suptitle(f"measured (dots) vs fitted {fit.model}, and residuals")
    fig.tight_layout()
    return fig


def design_figure(design: Any):
    """A and E criteria per subset as log-scale bars, D as log det C on a linear axis (det C
    itself under- or overflows); unidentifiable subsets are marked instead of drawn (their
    criteria are infinite)."""
    plt = _plt()
    t = design.table
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    for ax, crit in zip(axes, ("A", "D", "E")):
        vals = t[crit].to_numpy(float)
        finite = np.isfinite(vals)
        x = np.arange(len(t))
        ax.bar(x[finite], vals[finite], color="tab:blue")
        top = vals[finite].max() if finite.any() else 1.0
        for xi in x[~finite]:
            ax.text(xi, top, "not\nidentifiable", ha="center", va="bottom", fontsize=7, color="red")
        if crit != "D":
            ax.set_yscale("log")
        ax.set_xticks(x, t["code"].tolist())
        ax.set_title({"A": "A: trace C", "D": "D: log det C", "E": "E: max eig C"}[crit])
        if design.best is not None:
            ax.get_xticklabels()[
                int(np.flatnonzero(t["code"] == design.best["code"])[0])
            ].set_color("green")
    fig.suptitle(f"sensor design ({design.criterion}-optimal: "
                 f"{design.best['code'] if design.best else 'none'})")  # fmt: skip
    fig.tight_layout()
    return fig


def design_curve_figure(design: Any):
    """The design criterion against the number of sensors (every evaluated subset, and the
    best of each size as a line) and, when the sensors have costs, against the total cost
    with the Pareto front (the subsets no cheaper subset beats); the chosen subset in green."""
    plt = _plt()
    t = design.table[design.table["identifiable"].astype(bool)]
    crit = design.criterion
    with_cost = "cost" in t.columns
    fig, axes = plt.subplots(1, 2 if with_cost else 1, figsize=(10 if with_cost else 5.5, 4),
                             squeeze=False)  # fmt: skip
    ax = axes[0, 0]
    ax.plot(t["n_sensors"], t[crit], ".", color="0.7", ms=4, label="evaluated subsets")
    best = t.loc[t.groupby("n_sensors")[crit].idxmin()] if len(t) else t
    ax.plot(best["n_sensors"], best[crit], "o-", color="tab:blue", label="best per size")
    ax.set_xlabel("number of sensors")
    ax.set_ylabel(f"{crit} criterion")
    if with_cost:
        cax = axes[0, 1]
        order = t.sort_values(["cost", crit], kind="stable")
        front = order[order[crit] < order[crit].cummin().shift(fill_value=np.inf)]
        cax.plot(t["cost"], t[crit], ".", color="0.7", ms=4, label="evaluated subsets")
        cax.step(front["cost"], front[crit], "o-", where="post", color="tab:orange",
                 label="Pareto front")  # fmt: skip
        cax.set_xlabel("total cost")
        cax.set_ylabel(f"{crit} criterion")
    if design.best is not None:
        for a, x in ((ax, "n_sensors"), *(((axes[0, 1], "cost"),) if with_cost else ())):
            a.plot(design.best[x], design.best[crit], "*", color="green", ms=14, label="chosen")
    for a in axes[0]:
        if crit != "D":
            a.set_yscale("log")
        a.legend(fontsize=7)
    method = design.search.get("method", "enumeration")
    fig.suptitle(f"sensor design ({crit}-optimal, {method}, {design.search.get('budget', '')})")
    fig.tight_layout()
    return fig


def _branches(forces: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """Step indices of the loading branch (up to the first maximum) and of the unloading one
    (joined to the maximum so the drawn curve is continuous)."""
    top = int(np.argmax(forces))
    out = [(np.arange(top + 1), "loading")]
    if top + 1 < forces.size:
        out.append((np.arange(top, forces.size), "unloading"))
    return out


def validation_figure(validation: Any):
    """Validation of a calibrated model on new measurements (``PressValidation``): per sensor
    (columns) the measured series (dots) and the prediction over the force with its 95 %
    prediction band ``h +- 1.96 sqrt(sigma^2 + std^2)`` for one new measurement (shaded) and
    the band of the model's mean ``h +- 1.96 std`` (dashed; usually thin), loading and
    unloading apart (top row); the normalised residuals ``e`` per measurement with the
    +-1.96 limits and the share outside, loading and unloading apart (bottom row): a model
    that misses the hysteresis leaves the two branches on opposite sides of zero."""
    plt = _plt()
    sensors = list(validation.sensors)
    pred = validation.prediction
    res = validation.residuals
    q_kN = pred.forces / 1e3
    steps = np.sort(res["step"].unique())  # scenario order, as in to_cube
    fig, axes = plt.subplots(
        2, len(sensors), figsize=(4.2 * len(sensors), 6.4), squeeze=False,
        gridspec_kw={"height_ratios": [3, 2]}, sharex="col",
    )  # fmt: skip
    for k, s in enumerate(sensors):
        ax, rax = axes[0, k], axes[1, k]
        rows = res[res["sensor"] == s]
        f_kN = rows["force_N"].to_numpy(float) / 1e3
        ax.plot(f_kN, rows["measured"], ".", color="0.55", ms=3, label="measured")
        h, std = pred.mean[:, k], pred.std[:, k]
        band = Z95 * np.sqrt(validation.sigma[s] ** 2 + std**2)
        for (idx, lab), color in zip(_branches(pred.forces), ("tab:blue", "tab:orange")):
            ax.fill_between(q_kN[idx], h[idx] - band[idx], h[idx] + band[idx], color=color,
                            alpha=0.25, lw=0)  # fmt: skip
            ax.plot(q_kN[idx], h[idx], "-", color=color, label=f"{validation.model} {lab}")
            for sign in (-1.0, 1.0):
                ax.plot(q_kN[idx], h[idx] + sign * Z95 * std[idx], "--", color=color, lw=0.7)
        ax.set_ylabel(f"{s} (um)")
        ax.legend(fontsize=7)
        loading = rows["step"].isin(steps[: int(np.argmax(pred.forces)) + 1]).to_numpy()
        for mask, color, lab in ((loading, "tab:blue", "loading"),
                                 (~loading, "tab:orange", "unloading")):  # fmt: skip
            rax.plot(f_kN[mask], rows["normalised"].to_numpy()[mask], ".", ms=3, color=color,
                     label=lab)  # fmt: skip
        for level in (-Z95, Z95):
            rax.axhline(level, color="red", lw=0.8, ls="--")
        rax.axhline(0.0, color="k", lw=0.8)
        rax.set_title(f"outside the 95 % band: {validation.outside_band[s]:.1%}", fontsize=8)
        rax.set_xlabel("process force (kN)")
        rax.set_ylabel("normalised residual e")
        rax.legend(fontsize=7)
    fig.suptitle(
        f"validation of {validation.model}: measured vs predicted with 95 % prediction band"
    )
    fig.tight_layout()
    return fig

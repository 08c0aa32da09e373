"""Figures of a drive-train search (matplotlib imported lazily)."""

from __future__ import annotations

import numpy as np


def plot_fit(t: np.ndarray, measured: np.ndarray, simulated: np.ndarray, *, title: str = ""):
    """Measured vs simulated velocity of inertia 1 over time; returns the Figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(t, measured, lw=0.8, label="measured")
    ax.plot(t, simulated, lw=1.0, ls="--", label="simulated")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("velocity of inertia 1")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_history(history):
    """Best fitness per generation (log scale) from ``StructureSearch.history_``."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.semilogy(history["generation"], history["best_fitness"], "o-", label="generation best")
    ax.semilogy(history["generation"], history["overall_best_fitness"], "k--", label="best so far")
    ax.set_xlabel("generation")
    ax.set_ylabel("fitness 1/(RSS (1 + k_P d))")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_validation(
    t: np.ndarray,
    measured_velocity: np.ndarray,
    simulated_velocity: np.ndarray,
    measured_position: np.ndarray | None = None,
    simulated_position: np.ndarray | None = None,
    *,
    title: str = "open-loop validation",
    units: tuple[str, str] = ("rad/s", "rad"),
):
    """Measured vs open-loop simulated outputs over time, one axis per output (velocity, and
    position when both position arrays are given); RMSE, fit and R^2 of each output in its
    legend (``methods.validation.output_metrics``). ``units``: (velocity, position) units.
    Returns the Figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from methods.validation import output_metrics

    outputs = [("velocity", measured_velocity, simulated_velocity, units[0])]
    if measured_position is not None and simulated_position is not None:
        outputs.append(("position", measured_position, simulated_position, units[1]))
    fig, axes = plt.subplots(len(outputs), 1, figsize=(8, 2.8 * len(outputs)), sharex=True,
                             squeeze=False)  # fmt: skip
    for ax, (name, measured, simulated, unit) in zip(axes[:, 0], outputs):
        m = output_metrics(measured, simulated, name=name)
        ax.plot(t, measured, lw=0.8, label="measured")
        ax.plot(t, simulated, lw=1.0, ls="--",
                label=f"simulated: RMSE {m['rmse']:.3g} {unit}, fit {m['fit']:.1f} %, "
                      f"R² {m['r2']:.4f}")  # fmt: skip
        ax.set_ylabel(f"{name} [{unit}]")
        ax.legend(loc="best", fontsize=8)
    axes[-1, 0].set_xlabel("t [s]")
    axes[0, 0].set_title(title)
    fig.tight_layout()
    return fig


def plot_residual_correlations(residuals, *, title: str = "residual analysis"):
    """MATLAB ``resid``'s figure from a ``models.drivetrain.evidence.ResidualAnalysis``:
    autocorrelation of the residual (lags 1..M) and its cross-correlation with the input
    (lags 0..M) as stems, the per-lag band +-z/sqrt(N) dashed and the test's family band
    (Bonferroni over the lags) solid; the verdict of each test in its title, Fisher's periodic
    test's in the figure's. Returns the Figure."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    tests = [("autocorrelation of the residual", residuals.autocorrelation),
             ("cross-correlation of the input and the residual", residuals.cross_correlation)]  # fmt: skip
    fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    conf = f"{100 * residuals.confidence:g} %"
    for ax, (name, test) in zip(axes, tests):
        ax.stem(test.lags, test.values, basefmt=" ")
        for sign in (1.0, -1.0):
            ax.axhline(sign * test.band, ls="--", lw=0.8, color="grey")
            ax.axhline(sign * test.family_band, ls="-", lw=0.8, color="red")
        verdict = ("exact fit: not tested" if residuals.exact_fit
                   else "pass" if test.passed else "FAIL")  # fmt: skip
        ax.set_title(f"{name}: {verdict} ({conf}, N = {residuals.n})", fontsize=9)
    axes[-1].set_xlabel("lag [samples]")
    q = residuals.periodic
    if q is not None:  # Fisher's test: one number, no panel (the evidence keeps no spectrum)
        title += f"\nperiodic component: {'pass' if q.passed else 'FAIL'}, {q.describe()}"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig

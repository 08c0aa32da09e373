"""Figures of an inverse simulation (matplotlib imported lazily)."""

from __future__ import annotations

from methods.dae.result import InverseResult


def plot_result(result: InverseResult, coordinate_names=None, path=None):
    """Three panels: outputs vs demand, coordinates, controls. Returns the Figure."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    tab = result.table
    t = tab["t_s"].to_numpy()
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    gam = result.demand.evaluate(result.output_names, t, 0)[0]
    for i, name in enumerate(result.output_names):
        axes[0].plot(t, gam[i], label=f"{name} demand")
    axes[0].set_ylabel("outputs (demand)")
    names = coordinate_names or [
        c for c in tab.columns[1:] if c not in result.control_names and not c.startswith("v_")
    ]
    for c in names:
        axes[1].plot(t, tab[c], label=c)
    axes[1].set_ylabel("coordinates")
    for c in result.control_names:
        axes[2].plot(t, tab[c], label=c)
    axes[2].set_ylabel("controls")
    axes[2].set_xlabel("t [s]")
    for ax in axes:
        ax.legend(loc="best", fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{result.problem_name}: {result.method}, dt = {result.dt:g} s")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig

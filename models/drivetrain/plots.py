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

"""Oracle tests of the GP's random choices (models/drivetrain/gp/search.py).

Clone count: each generation copies ``N_clone ~ Binomial(P - n_elite, p_clone)`` individuals
and fills the rest by crossover. Oracle: scipy.stats.binom. The offspring step runs with
crossover and mutation replaced by stubs (crossover returns a fresh object, mutation returns
its argument), so the clones are exactly the non-elite offspring that are members of the
population; ``N_GEN`` generations give an empirical distribution that is compared with the
binomial pmf by a chi-square goodness-of-fit test (bins pooled to expected counts >= 5) at
significance 0.001: a correct implementation fails with probability 0.001 (the RNG is seeded,
so in fact deterministically passes or fails); a count drawn as, e.g., Binomial(P - n_elite,
0.45) instead of 0.5 is rejected with near certainty at this sample size (checked below).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import models.drivetrain.gp.breeding as breeding_module
from models.drivetrain.gp.breeding import offspring
from models.drivetrain.gp.search import StructureSearch

POPULATION, N_ELITE, P_CLONE, N_GEN = 20, 2, 0.5, 4000
ALPHA = 1e-3


def _chi2_pvalue(counts: np.ndarray, n: int, p: float) -> float:
    """Chi-square GOF p-value of counts (n + 1,) against Binomial(n, p), tails pooled."""
    expected = counts.sum() * stats.binom.pmf(np.arange(n + 1), n, p)
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(counts, expected):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    obs[-1] += acc_o
    exp[-1] += acc_e
    obs_a, exp_a = np.array(obs), np.array(exp)
    chi2 = float(np.sum((obs_a - exp_a) ** 2 / exp_a))
    return float(stats.chi2.sf(chi2, len(obs) - 1))


def test_clone_count_is_binomial(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(breeding_module, "crossover", lambda a, b, s, rng: object())
    monkeypatch.setattr(breeding_module, "mutate", lambda ind, s, rng: ind)
    gp = StructureSearch(
        POPULATION, 1, seed=0, n_elite=N_ELITE, p_clone=P_CLONE,
        simplify_best=False, avoid_duplicates=False, avoid_revisits=False,
    )  # fmt: skip
    rng = np.random.default_rng(12345)
    population = [object() for _ in range(POPULATION)]
    n_rest = POPULATION - N_ELITE
    counts = np.zeros(n_rest + 1)
    for _ in range(N_GEN):
        fitness = rng.normal(size=POPULATION)
        out, ahead = offspring(population, fitness, rng, gp.settings, set())
        assert ahead == []
        assert len(out) == POPULATION
        members = {id(x) for x in population}
        counts[sum(id(x) in members for x in out[N_ELITE:])] += 1
    p_value = _chi2_pvalue(counts, n_rest, P_CLONE)
    mean = float(counts @ np.arange(n_rest + 1) / N_GEN)
    print(f"clone count: mean {mean:.3f} (binomial {n_rest * P_CLONE}), chi2 p = {p_value:.3g}")
    assert p_value > ALPHA
    # the test has power: the same counts are incompatible with p_clone 0.45
    assert _chi2_pvalue(counts, n_rest, 0.45) < ALPHA

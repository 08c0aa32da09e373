"""`paper_settings`: the seed paper's search, and nothing else changed.

The oracle is an independent listing written from the paper's text (Tantau et al. 2019,
ICINCO, "Structure and Parameter Identification of Process Models with Hard Non-linearities
for Industrial Drive Trains by Means of Degenerate Genetic Programming"), not from the code.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.drivetrain.gp.presets import emps_settings, largest_structure, paper_settings
from models.drivetrain.gp.settings import GPSettings

#: what the paper fixes, with where it says so
PAPER_GP = {
    "population": 6,  # §4: "run for 20 generations with 6 individuals"
    "generations": 20,
    "k_p": 2.0,  # eq. 19: "Here, it has been set to 2"
    "selection": "roulette",  # §3.2: "Roulette Wheel Selection based on the fitness"
    "n_elite": 0,  # §3.2: N_clone ~ B(n_P, p_clone), the rest by recombination: no elite
    "structure_cache": False,  # §4: 500 iterations "for each individual of each generation"
    "avoid_duplicates": False,  # §3.2 has no novelty operators ...
    "avoid_revisits": False,
    "simplify_best": False,  # ... and no simplification move
    "polish_rounds": 0,  # ... nor a local search after the last generation
    "breed_ahead": 0,  # §3.2: each offspring belongs to the generation it was bred for
    "test_fraction": 0.0,  # §5: a training/test separation "could improve" (future work)
    # §3.1 step 2: initial trees of 1 up to "the maximal possible number of submodels that
    # leads to a model with all features enabled": one ladder + codes 5-11 = 8 nodes; no
    # other size bound than the construction rules
    "init_max_nodes": 8,
    "max_nodes": 8,
}
PAPER_IDENTIFICATION = {
    "n_starts": 1,  # §3.2: one optimisation from the inherited (or random) parameters
    "max_nfev": 500,  # §4: "a maximum of 500 iterations is allowed for each individual"
    "screen_nfev": 0,  # no screening stage
    "prefilter_hz": 0.0,  # eq. 19: RSS "of the error in time domain"
    "position_weight": 0.0,  # §4: "As output the velocity at mass 1 is used"
}


def _differences(a: GPSettings, b: GPSettings) -> dict:
    left, right = a.to_dict(), b.to_dict()
    ident = {f"identification.{k}": v for k, v in left.pop("identification").items()
             if v != right["identification"][k]}  # fmt: skip
    return {k: v for k, v in left.items() if k != "identification" and v != right[k]} | ident


def test_paper_settings_set_what_the_paper_fixes_and_nothing_else() -> None:
    paper = paper_settings()
    expected = {k: v for k, v in PAPER_GP.items() if getattr(GPSettings(), k) != v}
    expected |= {f"identification.{k}": v for k, v in PAPER_IDENTIFICATION.items()
                 if getattr(GPSettings().identification, k) != v}  # fmt: skip
    # every value the paper fixes is set; everything it leaves open (p_clone, mutation
    # probabilities, f_tanh, tolerances, time limit, JIT) stays greylab's
    assert _differences(paper, GPSettings()) == expected
    for name, value in PAPER_GP.items():
        assert getattr(paper, name) == value, name
    for name, value in PAPER_IDENTIFICATION.items():
        assert getattr(paper.identification, name) == value, name


def test_paper_settings_keep_the_recordings_units() -> None:
    emps = emps_settings()
    paper = paper_settings(emps)
    assert (paper.nominals, paper.bounds, paper.f_tanh) == (emps.nominals, emps.bounds, emps.f_tanh)
    assert paper.identification.position_weight == 0.0  # the paper fits velocity only
    # on another base, the same paper values
    assert _differences(paper, replace(paper_settings(), nominals=emps.nominals,
                                       bounds=emps.bounds, f_tanh=emps.f_tanh)) == {}  # fmt: skip
    # overrides are applied last (a study of the paper's operators at another size)
    assert paper_settings(population=10).population == 10


@pytest.mark.parametrize(
    ("allowed", "largest"),
    [
        (tuple(GPSettings().allowed), 8),  # one ladder + 5, 6, 7, 8, 9, 10, 11
        (("one_mass", "backlash", "coulomb"), 2),  # backlash needs two inertias
        (("one_mass", "two_mass", "backlash", "coulomb"), 3),
        (("two_mass",), 1),
    ],
)
def test_the_largest_structure_follows_the_construction_rules(allowed, largest) -> None:
    assert largest_structure(allowed) == largest
    assert paper_settings(GPSettings(allowed=allowed, max_nodes=1, init_max_nodes=1)).max_nodes == (
        largest
    )

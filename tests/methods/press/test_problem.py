"""One problem object for the press solvers (methods/press/lsq/problem.py): shapes are checked
once, bad ones are refused naming the field, and one fit and N fits take the same object."""

from __future__ import annotations

import numpy as np
import pytest

from methods import InputError
from methods.press.lsq.batch import solve_ls_batch
from methods.press.lsq.core import compile_model, solve_ls
from methods.press.lsq.problem import LSProblem
from tests.methods.press.helpers import Linear


def _problem(**change) -> LSProblem:
    model = Linear()
    comp = compile_model(model, 3)
    n_l, n_p = 3 * comp.n_s, comp.n_p
    args = dict(
        comp=comp, q=np.array([1.0, 2.0, 3.0]), zbar=np.zeros(n_l), wt=np.ones(n_l),
        p0=np.ones(n_p), scale=np.ones(n_p), lower=np.full(n_p, -np.inf),
        upper=np.full(n_p, np.inf),
    )  # fmt: skip
    args.update(change)
    return LSProblem(**args)


@pytest.mark.parametrize("field", ["q", "zbar", "wt", "p0", "scale", "lower", "upper"])
def test_a_wrong_shape_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(InputError, match=rf"^{field}: shape"):
        _problem(**{field: np.zeros(7)})


def test_one_fit_and_n_fits_take_the_same_object() -> None:
    one = _problem()
    rng = np.random.default_rng(0)
    # data of the model at known parameters: the fits must recover them (linear: exact)
    truth = np.array([0.7, -1.3])  # Linear: p0, p1
    h, _ = one.comp.eval_hJ(truth, one.q)
    single = solve_ls(_problem(zbar=h))
    assert single.success
    np.testing.assert_allclose(single.p, truth, rtol=1e-8, atol=1e-10)
    wt = rng.uniform(0.5, 2.0, (4, h.size))
    batch = _problem(zbar=np.tile(h, (4, 1)), wt=wt)
    P, _, ok = solve_ls_batch(batch)
    assert ok.all()
    np.testing.assert_allclose(P, np.tile(truth, (4, 1)), rtol=1e-6, atol=1e-8)
    with pytest.raises(InputError, match=r"^zbar: solve_ls fits one"):
        solve_ls(batch)
    with pytest.raises(InputError, match=r"^zbar: solve_ls_batch fits N"):
        solve_ls_batch(one)
    assert not one.batched and batch.batched

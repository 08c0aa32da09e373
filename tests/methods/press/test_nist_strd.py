"""NIST StRD nonlinear regression, every dataset from both official starts, fitted through the
public API (``fit_parameters`` with a ``ResponseModel`` plugin, ``tests/methods/press/nist``).

Oracles are NIST's certified values (11 digits), never outputs of this code. Targets (issue 9):
estimates to >= 6 matching digits (LRE) and first-order standard errors to >= 4 digits, and
``success`` only at the certified optimum. Lanczos1: its certified RSS (1.4e-25) is below what
float64 residuals reach at the printed parameters, so its RSS is only required to be at that
rounding level (< 1e-20) and its standard errors -- proportional to sqrt(RSS), i.e. to rounding
noise -- are not compared; its estimates are. Nelson (two predictors) runs like the others:
the plugin holds x2 per step. The whole module takes about 5 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from methods import fit_parameters
from methods.press.lsq.core import compile_model, parameter_arrays, solve_ls
from methods.press.lsq.lm import StopReason, stationarity
from methods.press.lsq.problem import LSProblem
from tests.methods.press import nist

CASES = [(name, start) for name in nist.MODELS for start in (1, 2)]
LRE_ESTIMATE = 6.0  # issue 9's target: 6 of the 11 certified digits
LRE_SE = 4.0  # standard errors: 4 digits (they depend on RSS and on the Jacobian at p_hat)


def _fit(name: str, start: int):
    data = nist.load(name)
    return data, fit_parameters(nist.StrdModel(data, start), nist.table(data), sigma={"y": 1.0})


@pytest.mark.parametrize(("name", "start"), CASES)
def test_certified_values_from_both_starts(name: str, start: int) -> None:
    data, fit = _fit(name, start)
    # every case is solved today (benchmarks/nist_strd.py); a failure would have to be honest
    assert fit.success, fit.message
    est = nist.lre(fit.values, data.certified)
    assert est.min() >= LRE_ESTIMATE, (fit.message, est)
    rss = 2.0 * fit.cost  # sigma = 1: cost = RSS / 2
    n, p = data.y.size, data.n_parameters
    if name == "Lanczos1":
        assert rss < 1e-20  # rounding level (see module docstring)
        return
    assert nist.lre(rss, data.rss) >= LRE_ESTIMATE, (rss, data.rss)
    se = np.sqrt(rss / (n - p) * np.diag(fit.covariance_first_order))
    se_lre = nist.lre(se, data.certified_sd)
    assert se_lre.min() >= LRE_SE, se_lre


def _raw(name: str, start: int, **kw):
    data = nist.load(name)
    model = nist.StrdModel(data, start)
    q = nist.table(data)["force_setpoint_N"].to_numpy()
    comp = compile_model(model, q.size)
    _, p0, scale, lo, hi = parameter_arrays(model)
    return (
        data,
        comp,
        q,
        scale,
        solve_ls(LSProblem(comp, q, data.y, np.ones(q.size), p0, scale, lo, hi), **kw),
    )


@pytest.mark.parametrize(("name", "start"), CASES)
def test_lm_alone_never_claims_a_point_that_is_not_certified(name: str, start: int) -> None:
    # the careful LM alone (no MINPACK first, no trust-region fallback) fails on a few
    # starts: it must then say so
    data, *_, res = _raw(name, start, fallback=False, minpack=False)
    if res.success:
        assert nist.lre(res.p, data.certified).min() >= LRE_ESTIMATE, res.message
    else:
        assert not res.reason.converged and "not converged" in res.message


def test_boxbod_runaway_point_fails_the_test() -> None:
    # issue 9: old rule |dx| <= xtol (1 + max|x|) stopped at b2 = 8e47 (cost 9200 vs 584):
    # there exp(-b2 x) underflows, the b2 column of J vanishes: singular, never converged
    data, comp, q, scale, _ = _raw("BoxBOD", 1)
    p = np.array([data.y.mean(), 8e47])
    h, J = comp.eval_hJ(p, q)
    t = stationarity((J * scale)[None], (h - data.y)[None], (p / scale)[None],
                     np.full(2, -np.inf), np.full(2, np.inf))  # fmt: skip
    assert StopReason(list(StopReason)[t.code[0]]) is StopReason.SINGULAR
    assert not t.converged[0]


def test_small_damped_steps_are_not_convergence() -> None:
    # MGH17 start 1, a few LM iterations in: far from the optimum (RSS 1e9 x certified) the
    # test must fail however small a damped step would be -- it looks at the undamped
    # Gauss-Newton step and the projected residual, not at the step taken
    data, comp, q, scale, _ = _raw("MGH17", 1)
    p = data.starts[0]
    h, J = comp.eval_hJ(p, q)
    t = stationarity((J * scale)[None], (h - data.y)[None], (p / scale)[None],
                     np.full(5, -np.inf), np.full(5, np.inf))  # fmt: skip
    # neither convergence test passes: the scaled Jacobian here has cond 4.5e13 (SVD), above
    # COND_JAC_MAX, so the verdict is SINGULAR on every platform. (The Gram matrix's smallest
    # eigenvalue, 1e-27 exactly, comes out as +2e-17 or -2.2e-16 by the platform's LAPACK;
    # the condition read from it was ~1e8 on one machine and infinite on another.)
    assert t.code[0] == list(StopReason).index(StopReason.SINGULAR) and not t.converged[0]
    assert 1e13 < t.condition[0] < 1e14, t.condition
    assert t.optimality[0] > 1e-3 and t.step[0] > 1.0


@pytest.mark.parametrize("cond", [1e3, 1e7, 1e9, 3e11, 1e14])
@pytest.mark.parametrize("held", [False, True])
def test_the_condition_is_resolved_beyond_what_the_gram_matrix_can(cond: float, held: bool) -> None:
    # oracle by construction: J = U diag(s) V^T with s = (1, 1, 1/cond, 1/cond) and V rotating
    # direction 1 into 3 and 2 into 4 by 45 degrees, so every column has the same norm and the
    # column scaling leaves the condition at exactly ``cond``. The Gram route resolves it only
    # up to ~1e8: the 1e9 case (not singular) and the 3e11 case (singular) need Jn's own
    # singular values. A held parameter is a unit column of its own (leaves cond as it is).
    rng = np.random.default_rng(int(np.log10(cond)) * 2 + held)
    m = 40
    U, _ = np.linalg.qr(rng.normal(size=(m, 4)))
    c = 1 / np.sqrt(2)
    V = np.array([[c, 0, c, 0], [0, c, 0, c], [-c, 0, c, 0], [0, -c, 0, c]])
    J = (U * [1.0, 1.0, 1 / cond, 1 / cond]) @ V.T
    r = rng.normal(size=m)
    lo, hi = np.full(5 if held else 4, -np.inf), np.full(5 if held else 4, np.inf)
    if held:  # a fifth parameter at its lower bound whose descent leaves the box
        extra = rng.normal(size=(m, 1))
        J, lo[-1] = np.hstack([J, extra if extra[:, 0] @ r > 0 else -extra]), 0.0
    for n in (1, 2):  # the single problem's arithmetic and the batched one
        t = stationarity(np.repeat(J[None], n, 0), np.repeat(r[None], n, 0),
                         np.zeros((n, J.shape[1])), lo, hi)  # fmt: skip
        rtol = 0.2 if cond > 1e12 else 1e-2  # the construction's own rounding: eps * cond
        assert np.allclose(t.condition, cond, rtol=rtol), (t.condition, cond)
        singular = t.code == list(StopReason).index(StopReason.SINGULAR)
        assert (singular == (cond > 1e10)).all(), (cond, t.code)


def test_certified_point_passes_the_test() -> None:
    # the other direction: at the certified optimum (rounded to 11 digits) of a well-posed
    # problem the test passes: the rounding moves p by ~1e-11 relative, a Gauss-Newton step
    # of that size is below xtol = 1e-10 in every component
    data, comp, q, scale, _ = _raw("Misra1d", 1)
    p = data.certified
    h, J = comp.eval_hJ(p, q)
    t = stationarity((J * scale)[None], (h - data.y)[None], (p / scale)[None],
                     np.full(2, -np.inf), np.full(2, np.inf))  # fmt: skip
    assert t.converged[0], (t.optimality, t.step)

"""The single fit's fast paths give the slow paths' answers bit for bit (issue 31).

- the convergence test of one problem (``convergence._stationarity_one``, what
  ``stationarity`` runs for N = 1) against the batched implementation (``_stationarity``), on
  random problems with held parameters, dependent and zero columns, zero, huge and non-finite
  residuals, and on a stack of two problems; with and without the caller's word that there are
  no bounds (``unbounded``);
- numpy's LAPACK gufuncs called directly (``methods.press.lsq.linalg``) against ``np.linalg``;
- the table pivot from the frame's column arrays against the pivot by Series (a pandas
  without ``DataFrame._get_column_array``), on str, object and categorical sensor columns,
  nullable integer ids, a sensor subset; the ids' unique values by a sort against ``np.unique``;
- the residuals at unit weights (MINPACK's and the Newton steps' evaluators: no product with
  the weights) against the weighted formula;
- the compile cache holds its models weakly: an entry goes with its model object;
- a model's parameter arrays without bounds against the general path;
- the solver's ``h`` and ``J`` at the estimate (what ``fit_parameters`` takes for the
  covariance) against a new evaluation there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from methods.press import data as press_data
from methods.press.lsq import convergence, linalg
from methods.press.lsq.core import (
    EPS,
    _point_fn,
    _residual_fns,
    compile_model,
    parameter_arrays,
    solve_ls,
)
from methods.press.lsq.evaluation import residual_fns
from methods.press.lsq.problem import LSProblem
from tests.methods.press import nist
from tests.methods.press.helpers import Linear, table_from

FIELDS = ("optimality", "step", "condition", "code", "at_precision", "gn_step")


def _random_case(rng: np.random.Generator, trial: int) -> tuple:
    m, n = int(rng.integers(1, 40)), int(rng.integers(1, 9))
    J = rng.normal(size=(1, m, n)) * 10.0 ** rng.integers(-5, 5, size=n)
    r = rng.normal(size=(1, m)) * 10.0 ** rng.integers(-12, 3)
    x = rng.normal(size=(1, n))
    special = trial % 9
    if special == 1:
        J[0, :, 0] = 0.0  # a dead column: singular
    elif special == 2:
        J[0, :, -1] = 2.0 * J[0, :, 0]  # dependent columns
    elif special == 3:
        r[:] = 0.0  # zero residual: the step route
    elif special == 4:
        r[0, 0] = np.nan  # not finite
    elif special == 5:
        J[0, -1, -1] = np.inf
    elif special == 6:
        r *= 1e160  # squares overflow
    elif special == 7:
        J = np.asfortranarray(J[0])[None]  # another memory layout
    lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
    if trial % 2:  # parameters at a bound, some held
        lo = np.where(rng.random(n) < 0.5, x[0], x[0] - 1.0)
        hi = np.where(rng.random(n) < 0.5, x[0], x[0] + 1.0)
    noise = np.abs(rng.normal(size=(1, m))) * 1e-16 if trial % 5 else None
    return J, r, x, lo, hi, noise


def _same(a: convergence.Stationarity, b: convergence.Stationarity) -> list[str]:
    out = []
    for f in FIELDS:
        u, v = getattr(a, f), getattr(b, f)
        if u.shape != v.shape or u.dtype != v.dtype or u.tobytes() != v.tobytes():
            out.append(f"{f}: {u} != {v}")
    return out


def test_the_one_problem_test_is_the_batched_test_bit_for_bit() -> None:
    rng = np.random.default_rng(31)
    codes = set()
    for trial in range(1500):
        J, r, x, lo, hi, noise = _random_case(rng, trial)
        gtol, xtol = 10.0 ** rng.integers(-12, -1), 10.0 ** rng.integers(-12, -1)
        with np.errstate(all="ignore"):
            slow = convergence._stationarity(J, r, x, lo, hi, noise, gtol, xtol)
        fast = convergence.stationarity(J, r, x, lo, hi, noise, gtol=gtol, xtol=xtol)
        assert not _same(slow, fast), (trial, _same(slow, fast))
        codes.add(int(fast.code[0]))
        if not trial % 2:  # no bounds: the caller may say so (no held masks at a finite x)
            if trial % 8 == 2:
                x = x.copy()
                x[0, 0] = np.inf if trial % 16 == 2 else -np.inf  # held after all
            with np.errstate(all="ignore"):
                slow = convergence._stationarity(J, r, x, lo, hi, noise, gtol, xtol)
            free = convergence.stationarity(
                J, r, x, lo, hi, noise, gtol=gtol, xtol=xtol, unbounded=True
            )
            assert not _same(slow, free), (trial, _same(slow, free))
    # every verdict of the test was exercised: none, gradient, step, singular, not finite
    order = list(convergence.StopReason)
    assert codes >= {-1} | {order.index(convergence.StopReason[k]) for k in
                            ("GRADIENT", "STEP", "SINGULAR", "NOT_FINITE")}  # fmt: skip


def test_the_direct_lapack_calls_are_numpys_bit_for_bit() -> None:
    rng = np.random.default_rng(17)
    for trial in range(300):
        n = int(rng.integers(1, 10))
        A = rng.normal(size=(n + 3, n)) * 10.0 ** rng.integers(-6, 6, size=n)
        G = A.T @ A
        if trial % 3 == 1:
            G = np.asfortranarray(G)  # another memory layout
        b = rng.normal(size=n)
        L = np.linalg.cholesky(G)
        pairs = [
            *zip(np.linalg.eigh(G), linalg.eigh(G)),
            (np.linalg.eigvalsh(G), linalg.eigvalsh(G)),
            (np.linalg.inv(G), linalg.inv(G)),
            (L, linalg.cholesky(G)),
            (np.linalg.solve(L.T, b), linalg.solve(L.T, b)),
        ]
        for u, v in pairs:
            assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()
    # failures raise numpy's errors, also under an errstate that ignores everything
    with np.errstate(all="ignore"):
        for call, message in (
            (lambda: linalg.inv(np.zeros((3, 3))), "Singular matrix"),
            (lambda: linalg.cholesky(-np.eye(2)), "Matrix is not positive definite"),
            (lambda: linalg.solve(np.zeros((2, 2)), np.ones(2)), "Singular matrix"),
        ):
            with pytest.raises(np.linalg.LinAlgError, match=message):
                call()
    # anything else goes through np.linalg: a stack, another dtype
    stack = np.stack([np.eye(2), 2.0 * np.eye(2)])
    assert linalg.inv(stack).tobytes() == np.linalg.inv(stack).tobytes()
    assert linalg.eigvalsh(np.eye(2, dtype=np.float32)).dtype == np.float32


def test_a_stack_of_problems_still_takes_the_batched_test() -> None:
    rng = np.random.default_rng(7)
    J, r, x, lo, hi, noise = _random_case(rng, 2)
    J2, r2, x2 = np.concatenate([J, J]), np.concatenate([r, r]), np.concatenate([x, x])
    noise2 = None if noise is None else np.concatenate([noise, noise])
    both = convergence.stationarity(J2, r2, x2, lo, hi, noise2)
    one = convergence.stationarity(J, r, x, lo, hi, noise)
    for f in FIELDS:
        assert getattr(both, f)[:1].tobytes() == getattr(one, f).tobytes(), f


def _tables() -> list[tuple[pd.DataFrame, list[str] | None]]:
    rng = np.random.default_rng(3)
    z = rng.normal(size=(3, 5, 2))
    forces = np.array([1.0, 2.0, 3.0, 2.0, 1.0]) + rng.normal(scale=1e-3, size=(3, 5))
    base = table_from(z, forces, ["a", "b"], setpoints=[1.0, 2.0, 3.0, 2.0, 1.0])
    shuffled = base.sample(frac=1.0, random_state=0).reset_index(drop=True)
    out = [(base, None), (shuffled, ["b"]), (shuffled, ["b", "a"])]
    out.append((base.astype({"sensor": object}), None))
    out.append((base.astype({"sensor": "category"}), ["a"]))
    out.append((base.astype({"series": "Int64", "step": "Int32"}), None))
    out.append((base.astype({"displacement_um": "float32", "force_N": "Float64"}), None))
    return out


def test_the_pivot_from_column_arrays_is_the_pivot_by_series(monkeypatch) -> None:
    assert hasattr(pd.DataFrame, "_get_column_array"), "this pandas: the fast path is untested"
    fast = [press_data.to_cube(t, s) for t, s in _tables()]
    monkeypatch.delattr(pd.DataFrame, "_get_column_array")
    slow = [press_data.to_cube(t, s) for t, s in _tables()]
    for a, b in zip(fast, slow):
        assert a.sensors == b.sensors
        for f in ("z", "forces", "setpoints", "series", "steps", "loading"):
            u, v = getattr(a, f), getattr(b, f)
            assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes(), f


def test_a_repeated_column_is_refused_on_both_paths(monkeypatch) -> None:
    table = _tables()[0][0]
    bad = table.assign(extra=1.0).rename(columns={"extra": "force_N"})
    with pytest.raises(ValueError):
        press_data.to_cube(bad)
    monkeypatch.delattr(pd.DataFrame, "_get_column_array")
    with pytest.raises(ValueError):
        press_data.to_cube(bad)


@pytest.mark.parametrize("unit", [True, False])
def test_minpack_residuals_at_unit_weights_are_the_weighted_formula(unit: bool) -> None:
    model = Linear()
    comp = compile_model(model, 4)
    q = np.array([0.5, 1.0, 2.0, 4.0])
    n_l = q.size * comp.n_s
    rng = np.random.default_rng(1)
    wt = np.ones(n_l) if unit else rng.uniform(0.5, 2.0, n_l)
    zbar, scale = rng.normal(size=n_l), np.array([2.0, 0.5])
    pr = LSProblem(comp, q, zbar, wt, np.ones(2), scale, np.full(2, -np.inf), np.full(2, np.inf))
    point = _point_fn(pr)
    x = rng.normal(size=2)
    r, Jt = point(x)
    h, J = comp.eval_hJ(x * scale, q)
    sw = np.sqrt(wt)
    assert r.tobytes() == (sw * (h - zbar)).tobytes()
    assert Jt.tobytes() == (J.T * (scale[:, None] * sw[None, :])).tobytes()
    # the careful LM's and the Newton steps' evaluator: the same formula in its own order
    evaluate, _ = _residual_fns(pr)
    R, Js, E = evaluate(x[None])
    assert R.tobytes() == (sw * (h - zbar))[None].tobytes()
    assert Js.tobytes() == ((sw[:, None] * J) * scale)[None].tobytes()
    assert E.tobytes() == (EPS * sw * (np.abs(h) + np.abs(zbar)))[None].tobytes()


@pytest.mark.parametrize(
    ("name", "start", "bounded", "unit"),
    [("Misra1a", 1, False, True), ("ENSO", 1, False, True), ("BoxBOD", 1, False, True),
     ("Misra1a", 2, False, False), ("Misra1a", 1, True, True), ("MGH09", 1, True, False)],
)  # fmt: skip
def test_the_solvers_h_and_J_at_the_estimate_are_a_new_evaluations(
    name: str, start: int, bounded: bool, unit: bool
) -> None:
    # fit_parameters takes h and J at the estimate from the solver (its evaluator keeps its
    # last two points) instead of evaluating the model again: the same bits, on MINPACK's
    # route with Newton steps (ENSO), its refused false success (BoxBOD start 1), non-unit
    # weights and the projected LM of a bounded problem
    data = nist.load(name)
    model = nist.StrdModel(data, start)
    q = nist.table(data)["force_setpoint_N"].to_numpy()
    comp = compile_model(model, q.size)
    _, p0, scale, lo, hi = parameter_arrays(model)
    if bounded:
        lo, hi = p0 - 1e3 * np.abs(p0), p0 + 1e3 * np.abs(p0)
    rng = np.random.default_rng(3)
    wt = np.ones(q.size) if unit else rng.uniform(0.5, 2.0, q.size)
    res = solve_ls(LSProblem(comp, q, data.y, wt, p0, scale, lo, hi))
    assert res.hJ is not None
    for kept, new in zip(res.hJ, comp.eval_hJ(res.p, q)):
        assert kept.shape == new.shape and kept.tobytes() == new.tobytes()
    # a point the evaluator did not see last: nothing kept
    evaluate, _, recent = residual_fns(LSProblem(comp, q, data.y, wt, p0, scale, lo, hi))
    evaluate((p0 / scale)[None])
    assert recent(p0 / scale) is not None and recent(p0 / scale + 1.0) is None


class _Params:
    def __init__(self, parameters: dict, bounds: dict | None) -> None:
        self.parameters, self.bounds = parameters, bounds


def test_the_arrays_of_a_model_without_bounds_are_the_general_paths() -> None:
    # a bound on no parameter takes the general path, with the same answer
    nan = float("nan")
    nones: tuple[dict | None, ...] = (None, {})
    for parameters in ({"a": 1.5, "b": 0.0, "c": -2e-7, "d": nan}, {}, {"k": 3e3}):
        for none in nones:
            fast = parameter_arrays(_Params(parameters, none))
            slow = parameter_arrays(_Params(parameters, {"not a parameter": (0.0, 1.0)}))
            assert fast[0] == slow[0]
            for u, v in zip(fast[1:], slow[1:]):
                assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()


def test_the_ids_unique_by_sort_are_numpys_unique() -> None:
    rng = np.random.default_rng(5)
    cases: list[np.ndarray] = [rng.integers(-5, 40, size=n) for n in (1, 2, 17, 300)]
    cases += [np.arange(250), np.zeros(9, dtype=np.int32), rng.integers(0, 9, 50).astype(np.uint8)]
    cases += [rng.normal(size=20).round(1), np.array([], dtype=int)]
    for ids in cases:
        got, want = press_data._unique(ids), np.unique(ids)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


class _NoWeakref:
    """A model object that takes no weak reference (a class with ``__slots__`` only)."""

    __slots__ = ("inner",)
    name = "no-weakref"
    sensors = Linear.sensors
    parameters = Linear.parameters

    def __init__(self) -> None:
        self.inner = Linear()

    def response(self, p, forces):
        return self.inner.response(p, forces)


def test_the_compile_cache_lives_as_long_as_its_model() -> None:
    import gc

    from methods.press.lsq import core

    model = Linear()
    comp = compile_model(model, 5)
    key = (id(model), 5)
    assert compile_model(model, 5) is comp and key in core._CACHE  # a hit while it lives
    del model
    gc.collect()
    assert key not in core._CACHE  # freed with its model: no leak, no stale hit
    held = _NoWeakref()
    comp2 = compile_model(held, 5)
    assert compile_model(held, 5) is comp2  # held strongly, as before

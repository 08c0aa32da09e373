"""Detection of model uncertainty (docs/methods.md section 1, Algorithm 1, with a calibrated statistic).

For each split: fit ``p_cal, C_cal`` on the calibration set and ``p_val, C_val`` on the
validation set; ``d = p_val - p_cal``;

- ``difference`` (default): ``T = d^T (C_cal + C_val)^-1 d`` -- under a correct model and
  disjoint data ``d ~ N(0, C_cal + C_val)``, so ``T ~ chi2_{n_p}``;
- ``paper``: ``T = d^T C_cal^-1 d`` (the seed's ellipsoid test; too liberal for halves);

``alpha_min = 1 - F_chi2_{n_p}(T)``. Each statistic and correction is one row of ``tables``
(covariance, null distribution, decision rule); an unknown name is refused. Family-wise error over the tests by Bonferroni
(reject test t if ``alpha_t < TOL / n_tests``) or Holm's step-down (sorted p-values
``alpha_(r) < TOL / (n_tests - r)``, r = 0.., stop at the first failure). The model is
rejected ("model uncertainty detected") when any test rejects.

Failed fits: a test counts only when both its fits passed the solver's convergence test
(``methods.press.lsq.lm``) and are identifiable; otherwise it gets no p-value (``alpha_min`` and
``T`` NaN, ``ok`` False, ``failure`` says why), never rejects, and is counted in
``n_failed``. Rule: when more than ``MAX_FAILED_FRACTION`` (10 %) of the tests run failed,
or fewer than ``MIN_VALID_TESTS`` (1) remain, the verdict is "inconclusive" (``rejected``
False, ``inconclusive`` True) whatever the others say: the converged fits are then a
selected subset, and their p-values are no longer uniform under a correct model. The family
size of the correction stays ``n_tests`` (failed tests included: conservative).
``prepare`` refuses (``FitNotConvergedError``, an ``InputError``) when the full-data fit,
the start of every split fit, does not converge.

Batch interface for orchestration: ``prepare`` -> ``make_splits`` -> ``run_split_batch``
(any partition of the splits, in any process) -> ``combine_tests``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from methods.press.data import resolve_sigma
from methods.press.lsq.batch import covariance_batch, solve_ls_batch
from methods.press.lsq.core import compile_model, parameter_arrays
from methods.press.lsq.estimation import fit_parameters, model_data
from methods.press.lsq.problem import LSProblem
from methods.press.uncertainty.detection import Detection
from methods.press.uncertainty.splits import Split, SplitKind, make_splits, parse_enum
from methods.press.uncertainty.tables import (
    Correction,
    Statistic,
    correction_row,
    statistic_row,
)

MAX_FAILED_FRACTION = 0.10
MIN_VALID_TESTS = 1


class FitNotConvergedError(InputError):
    """The full-data fit did not converge: no test can be built on it."""


@dataclass(frozen=True)
class Prepared:
    """Everything a worker needs to run splits; plain numpy arrays plus the model (picklable;
    the CasADi functions are rebuilt once per process by ``compile_model``).

    ``z`` (n_M, n_q, n_sel) corrected data of the selected sensors, ``cols`` their columns in
    the model response, ``sigma`` (n_sel,) um, ``setpoints`` (n_q,) N, ``loading`` (n_q,),
    ``start`` the full-data estimate (start of every split fit), ``scale``/``lower``/``upper``.
    """

    model: Any
    names: tuple[str, ...]
    sensors: tuple[str, ...]
    z: np.ndarray
    cols: np.ndarray
    sigma: np.ndarray
    setpoints: np.ndarray
    loading: np.ndarray
    start: np.ndarray
    scale: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    statistic: Statistic | str = Statistic.DIFFERENCE


def prepare(
    model: Any,
    table: pd.DataFrame,
    *,
    sensors: Sequence[str] | None = None,
    sigma: Mapping[str, float] | pd.DataFrame | None = None,
    statistic: Statistic | str = Statistic.DIFFERENCE,
) -> Prepared:
    """Validate inputs, fit on all data (start values for the splits), pack arrays.

    Raises ``FitNotConvergedError`` (an ``InputError``) when the full-data fit does not pass
    the convergence test: every split fit would start from an arbitrary point.
    """
    statistic_row(statistic)  # refuses a statistic without a row in tables.STATISTICS
    stat = str(statistic)
    data, cols = model_data(model, table, sensors)
    sig, _ = resolve_sigma(sigma, data)
    names, _, scale, lo, hi = parameter_arrays(model)
    full = fit_parameters(model, table, sensors=data.sensors, sigma=dict(zip(data.sensors, sig)))
    if not full.success:
        name = getattr(model, "name", type(model).__name__)
        raise FitNotConvergedError(
            f"model {name!r} on sensors {list(data.sensors)}: the fit on all data did not"
            f" converge ({full.message}; cost {full.cost:.4g} after {full.n_iterations}"
            f" iterations, parameters {full.parameters}); the split tests start from it, so no"
            " verdict is possible: check the model's start values and bounds, the sensors"
            " and the data"
        )
    return Prepared(
        model, tuple(names), data.sensors, data.z, cols, sig, data.setpoints, data.loading,
        full.values, scale, lo, hi, stat,
    )  # fmt: skip


def _fit_many(
    prep: Prepared, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Estimates (N, n_p), covariances C (N, n_p, n_p), converged (N,) and identifiable (N,)
    flags for 0/1 weights W (N, n_M, n_q) over (series, step); the batch runs vectorised."""
    n, n_q = W.shape[0], prep.z.shape[1]
    cnt = W.sum(axis=1)  # (N, n_q)
    zsum = np.einsum("nmq,mqs->nqs", W, prep.z)
    zbar_sel = zsum / np.maximum(cnt, 1)[:, :, None]
    wt_sel = cnt[:, :, None] / prep.sigma**2
    n_s_model = len(prep.model.sensors)
    zbar: np.ndarray = np.zeros((n, n_q, n_s_model))
    wt: np.ndarray = np.zeros((n, n_q, n_s_model))
    zbar[:, :, prep.cols] = zbar_sel
    wt[:, :, prep.cols] = wt_sel
    zbar, wt = zbar.reshape(n, -1), wt.reshape(n, -1)
    comp = compile_model(prep.model, n_q)
    problem = LSProblem(
        comp, prep.setpoints, zbar, wt, prep.start, prep.scale, prep.lower, prep.upper
    )
    P, _, ok = solve_ls_batch(problem)
    C, ident = covariance_batch(comp, prep.setpoints, P, zbar, wt, prep.scale)
    return P, C, ok, ident


def statistic_value(
    d: np.ndarray, C_cal: np.ndarray, C_val: np.ndarray, kind: Statistic | str
) -> float:
    """``T = d^T V^-1 d`` with ``V`` from the statistic's row (``tables.STATISTICS``); NaN
    where ``V`` is not finite. An unknown statistic raises ``InputError``."""
    V = statistic_row(kind).covariance(C_cal, C_val)
    if not np.all(np.isfinite(V)):
        return np.nan
    return float(d @ np.linalg.solve(V, d))


def run_split_batch(
    prepared: Prepared, splits: Sequence[Split], *, statistic: Statistic | str | None = None
) -> pd.DataFrame:
    """Run the tests of ``splits``; one row per split (columns: test, axis, cal, val,
    p_cal_<name>, p_val_<name>, T, alpha_min, ok, failure). ``statistic`` overrides the
    prepared one. A test whose calibration or validation fit did not converge or is not
    identifiable has ``ok`` False, ``T`` and ``alpha_min`` NaN and the reason in ``failure``
    ("" when ok).
    """
    kind = prepared.statistic if statistic is None else statistic
    p_value = statistic_row(kind).p_value  # refuses a name without a row
    n_m, n_q, _ = prepared.z.shape
    n_p = len(prepared.names)
    if not splits:
        return pd.DataFrame()
    masks = [sp.masks(n_m, n_q) for sp in splits]
    W = np.stack([m[0] for m in masks] + [m[1] for m in masks])
    P, C, conv, ident = _fit_many(prepared, W)
    k = len(splits)
    why: list[list[str]] = [[] for _ in range(k)]
    for t in np.flatnonzero(~(conv[:k] & ident[:k] & conv[k:] & ident[k:])):
        why[t] = [
            f"{side} fit {what}"
            for side, i in (("calibration", t), ("validation", k + t))
            for what, bad in (("did not converge", not conv[i]), ("not identifiable", not ident[i]))
            if bad
        ]
    good = np.array([not w for w in why])
    T = np.full(k, np.nan)
    T[good] = _statistic_values(P[k:][good] - P[:k][good], C[:k][good], C[k:][good], kind)
    for t in np.flatnonzero(good & ~np.isfinite(T)):
        why[t].append("statistic not finite")
    alpha = np.full(k, np.nan)
    finite = np.isfinite(T)
    alpha[finite] = p_value(T[finite], n_p)
    columns: dict[str, Any] = {
        "test": [sp.test for sp in splits],
        "axis": [sp.axis for sp in splits],
        "cal": [",".join(map(str, sp.cal)) for sp in splits],
        "val": [",".join(map(str, sp.val)) for sp in splits],
    }
    columns.update({f"p_cal_{n}": P[:k, j] for j, n in enumerate(prepared.names)})
    columns.update({f"p_val_{n}": P[k:, j] for j, n in enumerate(prepared.names)})
    columns.update(T=T, alpha_min=alpha, ok=~np.array([bool(w) for w in why]))
    columns["failure"] = ["; ".join(w) for w in why]
    return pd.DataFrame(columns)


def _statistic_values(
    d: np.ndarray, C_cal: np.ndarray, C_val: np.ndarray, kind: Statistic | str
) -> np.ndarray:
    """``statistic_value`` for N tests at once (d (N, n_p), C (N, n_p, n_p)): one batched
    solve; each T the same arithmetic as the single one (the same LAPACK solve, the same dot)."""
    V = statistic_row(kind).covariance(C_cal, C_val)
    T = np.full(d.shape[0], np.nan)
    ok = np.isfinite(V).all(axis=(1, 2))
    if ok.any():
        try:
            sol = np.linalg.solve(V[ok], d[ok][:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:  # a singular V: the single path says which
            return np.array([statistic_value(di, a, b, kind) for di, a, b in zip(d, C_cal, C_val)])
        T[ok] = [float(di @ si) for di, si in zip(d[ok], sol)]
    return T


def decisions(
    alpha: np.ndarray, tol: float, correction: Correction | str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-test rejection and threshold by the correction's row (``tables.CORRECTIONS``); NaN
    p-values never reject. An unknown correction raises ``InputError``."""
    decide = correction_row(correction).decide
    return decide(np.where(np.isfinite(alpha), alpha, np.inf), tol)


def combine_tests(
    rows: pd.DataFrame | Sequence[pd.DataFrame],
    tol: float = 0.05,
    correction: Correction | str = Correction.BONFERRONI,
    n_tests: int | None = None,
    *,
    model: str = "",
    split: str = "",
    statistic: str = "difference",
) -> Detection:
    """Combine test rows (from any number of batches) into a ``Detection``.

    ``n_tests`` (default: number of rows) is the family size of the correction.
    """
    correction_row(correction)  # refuses a correction without a row in tables.CORRECTIONS
    if not 0.0 < tol < 1.0:
        raise InputError(f"tol must lie in (0, 1), got {tol}")
    tests = rows if isinstance(rows, pd.DataFrame) else pd.concat(list(rows), ignore_index=True)
    tests = tests.sort_values("test").reset_index(drop=True)
    m = len(tests) if n_tests is None else int(n_tests)
    if m < len(tests) or m < 1:
        raise InputError(f"n_tests={m} is smaller than the {len(tests)} tests given")
    alpha = tests["alpha_min"].to_numpy(float)
    rej, thr = decisions(np.concatenate([alpha, np.ones(m - len(tests))]), tol, correction)
    tests = tests.assign(threshold=thr[: len(tests)], rejected=rej[: len(tests)])
    warnings = []
    ok = tests["ok"].astype(bool).to_numpy() if "ok" in tests else np.isfinite(alpha)
    ok = ok & np.isfinite(alpha)
    n_failed = int((~ok).sum())
    n_valid = len(tests) - n_failed
    inconclusive = n_failed > MAX_FAILED_FRACTION * len(tests) or n_valid < MIN_VALID_TESTS
    if n_failed:
        warnings.append(
            f"{n_failed} of {len(tests)} test(s) with a failed or unidentifiable fit: no p-value,"
            " never reject"
        )
    if inconclusive:
        warnings.append(
            f"verdict inconclusive: {n_failed} of {len(tests)} tests failed (more than"
            f" {MAX_FAILED_FRACTION:.0%} or fewer than {MIN_VALID_TESTS} valid test(s) left)"
        )
    return Detection(
        model=model, split=split, statistic=str(statistic), correction=str(correction),
        tol=float(tol), n_tests=m, rejected=bool(rej.any()) and not inconclusive,
        alpha_min=alpha, threshold=float(tol / m), tests=tests, n_rejections=int(rej.sum()),
        warnings=tuple(warnings), n_failed=n_failed, inconclusive=inconclusive,
    )  # fmt: skip


def detect_model_uncertainty(
    model: Any,
    table: pd.DataFrame,
    *,
    n_tests: int,
    tol: float = 0.05,
    split: SplitKind | str = SplitKind.RANDOM,
    statistic: Statistic | str = Statistic.DIFFERENCE,
    correction: Correction | str = Correction.BONFERRONI,
    seed: int = 0,
    sensors: Sequence[str] | None = None,
    sigma: Mapping[str, float] | pd.DataFrame | None = None,
    calibration_fraction: float = 0.5,
    progress: Callable[[int, int], None] | None = None,
) -> Detection:
    """Algorithm 1 on a table corrected to setpoints (``correct_to_setpoints``).

    ``n_tests`` splits of kind ``split`` (capped at the number of distinct splits, see
    ``methods.press.uncertainty.splits``), statistic, correction and ``tol`` as in the module docstring.
    ``progress(done, total)`` is called after every batch of tests.
    """
    correction_row(correction)  # refused before the fit
    kind = parse_enum(SplitKind, split, "split")
    prep = prepare(model, table, sensors=sensors, sigma=sigma, statistic=statistic)
    splits = make_splits(
        kind, prep.setpoints, prep.loading, prep.z.shape[0], n_tests, seed, calibration_fraction
    )
    batches, step = [], 25
    for start in range(0, len(splits), step):
        batches.append(run_split_batch(prep, splits[start : start + step]))
        if progress is not None:
            progress(min(start + step, len(splits)), len(splits))
    det = combine_tests(
        batches, tol, correction, model=str(getattr(model, "name", type(model).__name__)),
        split=kind.value, statistic=str(prep.statistic),
    )  # fmt: skip
    if len(splits) < n_tests:
        note = f"only {len(splits)} distinct {kind.value} split(s) exist; ran those"
        det = det.with_warning(note)
    return det

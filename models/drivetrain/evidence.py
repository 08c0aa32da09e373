"""How sure an identified drive-train structure is: the evidence a reviewer asks for.

Pure statistics on arrays (no Prefect/MLflow); ``models.drivetrain.structure_fit`` applies them
to an identified structure on a recording (docs/methods.md §2.9).

- **Parameter uncertainty** (:func:`parameter_uncertainty`): the linearised covariance of the
  output-error estimate from the exact Jacobian ``J = dy_sim/dp`` at the estimate. Without a
  prefilter ``cov = s^2 (J^T J)^-1``; with the search's zero-phase prefilter ``F`` (the
  estimate minimises ``|F(y_sim - y)|^2``) the sandwich ``s^2 A^-1 B A^-1``, ``A = (FJ)^T FJ``,
  ``B = (FJ)^T F F^T (FJ)`` (``F^T`` by :func:`filter_adjoint`: the padding at the record's
  ends makes ``F`` far from symmetric there). ``s^2 = e^T e / (N - d)`` from the
  raw residual ``e = y_sim - y``. A start velocity estimated from the same noisy velocity
  samples (``start``) moves the fit with its own error: the covariance propagates it, the
  ``B`` term with ``(I - j0 c^T)``. Intervals: ``value +- t_{0.975, N-d} stderr``; the
  simultaneous ones (``joint_lower``, ``joint_upper``) with Bonferroni's ``t_{1-0.025/m}``
  over the ``m`` determined parameters, so that every true value lies inside its joint
  interval with at least 95 % (each marginal one alone: 95 %, all ``d`` of them together
  about ``0.95^d`` when they are independent). A parameter is
  flagged not identifiable when the scaled Jacobian is rank deficient in its direction
  (singular value below ``RANK_TOL`` of the largest) or its interval is wider than its box.
- **Residual analysis** (:func:`residual_analysis`, as MATLAB's ``resid``): autocorrelation of
  the residual at lags 1..M and its cross-correlation with the input at lags 0..M, each with
  the per-lag band ``+-z/sqrt(N)`` (``z`` of ``confidence``) for the figure; the pass/fail uses
  the family band ``+-z_B/sqrt(N)`` with a Bonferroni ``z_B`` over the lags, so a white residual
  independent of the input fails at most at rate ``1 - confidence`` per test.
- **Rival table** (:func:`rival_table`): the structure and its one-step neighbours with RSS,
  parameter count, AIC ``n ln(RSS/n) + 2d``, BIC ``n ln(RSS/n) + d ln n`` and the F-test of
  each nested pair; the preferred structure is the lowest BIC among the structure itself, its
  simpler neighbours, and the richer ones the F-test supports (``p < alpha``).
  ``search_evidence.search_rival_table``: the same rows judged by the search's own rule (its
  final stage with ``final_alpha``, ``models.drivetrain.gp.selection``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

FULL_ADJOINT = 2500  # records up to this length get the prefilter's adjoint from all of F
MAX_EDGE = 2048  # longest end window (samples) of the prefilter's exact adjoint
RANK_TOL = 1e-8  # relative singular value below which a direction is not identifiable
EXACT_FIT = 1e-12  # residual sum of squares / output's: an exact (noise-free) fit
UNDERFIT = (
    "fits worse than the structure it contains: its identification stalled (or the "
    "added submodel cannot be switched off inside its box); not evidence either way"
)


@dataclass(frozen=True)
class ParameterInterval:
    """One parameter: estimate, standard error, interval at ``level``, its box and the
    identifiability flag (``note`` says why not, or that it sits on a bound); ``joint_lower``,
    ``joint_upper``: the simultaneous interval (module docstring), NaN until computed."""

    name: str
    value: float
    stderr: float
    lower: float
    upper: float
    box: tuple[float, float]
    identifiable: bool
    note: str = ""
    joint_lower: float = math.nan
    joint_upper: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["box"] = list(self.box)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in out.items()}  # fmt: skip


def parameter_uncertainty(
    jacobian: np.ndarray,
    residual: np.ndarray,
    values: np.ndarray,
    names: Sequence[str],
    boxes: Sequence[tuple[float, float]],
    *,
    prefilter: Callable[[np.ndarray], np.ndarray] | None = None,
    level: float = 0.95,
    notes: list[str] | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[ParameterInterval], float, float]:
    """Standard errors and ``level`` intervals of an output-error estimate (module docstring).

    ``jacobian`` (N, d): ``dy_sim/dp`` at ``values``; ``residual`` (N,): ``y_sim - y``.
    ``start``: ``(j0, c)`` when the simulation starts from a velocity estimated from the same
    noisy samples, ``c @ y[:c.size]`` (``gp.signals.initial_velocity_weights``), ``j0`` (N,)
    the output's sensitivity to it: that estimate's error moves the fit too (with the
    prefilter ``F``, ``dp = A^-1 (FJ)^T F (I - j0 c^T) noise``), and the covariance carries it.
    Returns (intervals, residual standard deviation ``s``, condition number of the Jacobian
    with columns scaled to the parameters' magnitudes); ``notes`` gets a line when the
    prefilter's adjoint was approximated (:func:`filter_adjoint`)."""
    jac = np.asarray(jacobian, float)
    e = np.asarray(residual, float)
    n, d = jac.shape
    values = np.asarray(values, float)
    width = np.array([hi - lo for lo, hi in boxes], float)
    scale = np.where(values != 0.0, np.abs(values), np.maximum(width, 1e-300))
    s2 = float(e @ e) / max(n - d, 1)
    js = jac * scale
    jf = prefilter(js) if prefilter is not None else js
    _, sing, vt = np.linalg.svd(jf, full_matrices=False)
    cond = float(sing[0] / sing[-1]) if sing[-1] > 0 else math.inf
    keep = sing > RANK_TOL * sing[0] if sing[0] > 0 else np.zeros(d, bool)
    inv_a = (vt[keep].T / sing[keep] ** 2) @ vt[keep]  # pseudo-inverse of A (scaled)
    g = js  # dp = A^-1 g^T noise
    if prefilter is not None:  # B = (FJ)^T F F^T (FJ) = |F^T (FJ)|^2
        g, exact = filter_adjoint(prefilter, jf)
        if not exact and notes is not None:
            notes.append("the prefilter reaches far into the record: its adjoint approximated "
                         "by itself (intervals may be up to a quarter too narrow)")  # fmt: skip
    if start is not None:  # the start velocity's own noise: g^T (I - j0 c^T)
        j0, c = np.asarray(start[0], float), np.asarray(start[1], float)
        g = g.copy()
        g[: c.size] -= np.outer(c, j0[:n] @ g)
    cov = s2 * inv_a @ (g.T @ g) @ inv_a if g is not js else s2 * inv_a
    stderr = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * scale
    # a parameter with a component along a dropped (near-null) direction is not determined
    null = vt[~keep]
    weak = (np.abs(null) > 1e-3).any(axis=0) if null.size else np.zeros(d, bool)
    t = float(stats.t.ppf(0.5 + level / 2.0, max(n - d, 1)))
    m = max(int(np.sum(~weak)), 1)  # Bonferroni over the determined parameters
    t_joint = float(stats.t.ppf(1.0 - (1.0 - level) / (2.0 * m), max(n - d, 1)))
    out = []
    for i, name in enumerate(names):
        lo, hi = boxes[i]
        se = math.inf if weak[i] else float(stderr[i])
        note = ""
        if weak[i]:
            note = "not identifiable: the data do not separate it (rank-deficient Jacobian)"
        elif 2.0 * t * se > hi - lo:
            note = "not identifiable: its interval is wider than its box"
        elif min(values[i] - lo, hi - values[i]) <= 1e-6 * (hi - lo):
            note = "at a bound of its box: the interval assumes an interior optimum"
        out.append(ParameterInterval(
            name=str(name), value=float(values[i]), stderr=se, lower=float(values[i] - t * se),
            upper=float(values[i] + t * se), box=(float(lo), float(hi)),
            identifiable=not note.startswith("not identifiable"), note=note,
            joint_lower=float(values[i] - t_joint * se),
            joint_upper=float(values[i] + t_joint * se),
        ))  # fmt: skip
    return out, math.sqrt(s2), cond


def filter_adjoint(
    prefilter: Callable[[np.ndarray], np.ndarray], w: np.ndarray
) -> tuple[np.ndarray, bool]:
    """(``F^T w``, exact) for the linear map ``F`` (along axis 0) of a zero-phase filter: its
    kernel is symmetric, so ``F^T w = F w`` except within the filter's reach of the record's
    ends, where the padding breaks the symmetry (``sosfiltfilt``: up to 0.9 of a unit impulse);
    those rows are exact, from ``F`` of unit impulses on a window at either end (all of ``F``
    for records up to ``FULL_ADJOINT`` samples). A filter whose reach passes ``MAX_EDGE``
    samples or a third of the record gets ``F w`` (exact False: the intervals approximate)."""
    n = w.shape[0]
    if n <= FULL_ADJOINT:
        return prefilter(np.eye(n)).T @ w, True
    m = min(n, 4 * MAX_EDGE)
    impulse = np.zeros(m)
    impulse[m // 2] = 1.0
    h = np.abs(prefilter(impulse))
    reach = int(np.max(np.abs(np.flatnonzero(h > 1e-12 * h.max()) - m // 2)))
    edge = 2 * reach + 64
    out = prefilter(w)
    if edge > MAX_EDGE or 3 * edge > n:
        return out, False
    eye = np.zeros((3 * edge, edge))
    eye[np.arange(edge), np.arange(edge)] = 1.0
    out[:edge] = prefilter(eye).T @ w[: 3 * edge]
    out[-edge:] = prefilter(eye[::-1, ::-1]).T @ w[-3 * edge :]
    return out, True


@dataclass(frozen=True)
class CorrelationTest:
    """Normalised correlations at ``lags`` with the per-lag band (figure) and the family band
    (the test); ``passed``: every value inside the family band."""

    lags: tuple[int, ...]
    values: tuple[float, ...]
    band: float
    family_band: float
    passed: bool
    worst_lag: int
    worst: float

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["lags"], out["values"] = list(self.lags), list(self.values)
        return out


@dataclass(frozen=True)
class ResidualAnalysis:
    """Autocorrelation of the residual and its cross-correlation with the input (``resid``).

    ``passed``: both tests pass; None for an exact fit (residual at the numerical floor, the
    tests say nothing)."""

    n: int
    confidence: float
    autocorrelation: CorrelationTest
    cross_correlation: CorrelationTest
    passed: bool | None
    exact_fit: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "confidence": self.confidence, "passed": self.passed,
                "exact_fit": self.exact_fit,
                "autocorrelation": self.autocorrelation.to_dict(),
                "cross_correlation": self.cross_correlation.to_dict()}  # fmt: skip


def _correlation(values: np.ndarray, lags: Sequence[int], n: int, confidence: float):
    alpha = 1.0 - confidence
    band = float(stats.norm.ppf(1.0 - alpha / 2.0)) / math.sqrt(n)
    family = float(stats.norm.ppf(1.0 - alpha / (2.0 * len(lags)))) / math.sqrt(n)
    worst = int(np.argmax(np.abs(values)))
    return CorrelationTest(
        lags=tuple(int(k) for k in lags), values=tuple(float(v) for v in values), band=band,
        family_band=family, passed=bool(np.all(np.abs(values) <= family)),
        worst_lag=int(lags[worst]), worst=float(values[worst]),
    )  # fmt: skip


def residual_analysis(
    residual: np.ndarray,
    u: np.ndarray,
    *,
    max_lag: int = 25,
    confidence: float = 0.99,
    output: np.ndarray | None = None,
) -> ResidualAnalysis:
    """Residual tests over lags up to ``max_lag`` (at most N/4): ``r_ee(k) = sum e_t e_{t+k} /
    sum e_t^2`` (k >= 1) and ``r_eu(k) = sum e_{t+k} u_t / sqrt(sum e^2 sum u^2)`` (k >= 0: the
    input leads the residual), both of the mean-removed series. Under "the residual is white and
    independent of the input" each is ~N(0, 1/N). ``output``: the measured output, to call a
    residual at the numerical floor an exact fit."""
    e = np.asarray(residual, float) - float(np.mean(residual))
    x = np.asarray(u, float) - float(np.mean(u))
    n = e.size
    m = max(1, min(int(max_lag), n // 4))
    ee = float(e @ e)
    norm_u = math.sqrt(max(ee * float(x @ x), 1e-300))
    auto = np.array([float(e[:-k] @ e[k:]) for k in range(1, m + 1)]) / max(ee, 1e-300)
    cross = np.array([float(e[k:] @ x[: n - k]) for k in range(0, m + 1)]) / norm_u
    exact = False
    if output is not None:
        y = np.asarray(output, float)
        exact = ee <= EXACT_FIT * max(float(np.sum((y - y.mean()) ** 2)), 1e-300)
    a = _correlation(auto, range(1, m + 1), n, confidence)
    c = _correlation(cross, range(0, m + 1), n, confidence)
    passed = None if exact else bool(a.passed and c.passed)
    return ResidualAnalysis(n, confidence, a, c, passed, exact)


def information(rss: float, n: float, d: int) -> tuple[float, float]:
    """(AIC, BIC) of a Gaussian output error: ``n ln(RSS/n) + 2d``, ``n ln(RSS/n) + d ln n``."""
    fit = n * math.log(max(rss, 1e-300) / n)
    return fit + 2.0 * d, fit + d * math.log(n)


def f_test(rss_simple: float, d_simple: int, rss_rich: float, d_rich: int, n: float) -> tuple:
    """(F, p) of the nested pair: does the richer structure's drop in RSS exceed what its
    ``d_rich - d_simple`` extra parameters give by chance? (p = 1 when it does not drop.)"""
    extra, dof = d_rich - d_simple, n - d_rich
    if extra <= 0 or dof <= 0 or not (math.isfinite(rss_simple) and math.isfinite(rss_rich)):
        return math.nan, math.nan
    if rss_rich >= rss_simple:
        return 0.0, 1.0
    f = ((rss_simple - rss_rich) / extra) / (max(rss_rich, 1e-300) / dof)
    return float(f), float(stats.f.sf(f, extra, dof))


@dataclass(frozen=True)
class Rival:
    """One row of the rival table (``relation``: best, simpler or richer)."""

    codes: tuple[int, ...]
    structure: tuple[str, ...]
    relation: str
    rss: float
    n_params: int
    aic: float
    bic: float
    f: float = math.nan
    p_value: float = math.nan
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["codes"], out["structure"] = list(self.codes), list(self.structure)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in out.items()}  # fmt: skip


@dataclass(frozen=True)
class RivalTable:
    """The structure and its neighbours on ``part`` of ``n`` samples; ``preferred``: the codes
    the ``rule`` chooses (``agrees``: the structure itself)."""

    rows: tuple[Rival, ...]
    n: int
    part: str
    preferred: tuple[int, ...]
    rule: str
    alpha: float

    @property
    def agrees(self) -> bool:
        return self.preferred == self.rows[0].codes

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "n": self.n, "part": self.part,
                "preferred": list(self.preferred), "agrees": self.agrees, "rule": self.rule,
                "alpha": self.alpha}  # fmt: skip


def rival_table(
    best: tuple[tuple[int, ...], tuple[str, ...], float, int],
    rivals: Sequence[tuple[tuple[int, ...], tuple[str, ...], float, int, str]],
    n: int,
    *,
    part: str = "whole record",
    alpha: float = 0.01,
    ss: float = 0.0,
    n_eff: float | None = None,
) -> RivalTable:
    """``best``: (codes, names, RSS, d); ``rivals``: (codes, names, RSS, d, "simpler" |
    "richer"). The F-test of each rival is against ``best`` (nested in the stated direction).
    ``ss``: the output's sum of squares about its mean on the part (RSS below ``EXACT_FIT``
    of it is numerically zero: a richer rival there is not under-fitted). ``n_eff``: the
    effective sample size of autocorrelated residuals (``structure_fit.effective_samples``): the
    criteria and the F-test count ``n_eff`` samples of the per-sample variance ``RSS / n``."""
    m = float(n if n_eff is None else min(max(n_eff, 1.0), n))
    k = m / n
    codes, names, rss, d = best
    aic, bic = information(rss * k, m, d)
    rows = [Rival(tuple(codes), tuple(names), "best", float(rss), int(d), aic, bic)]
    for r_codes, r_names, r_rss, r_d, relation in rivals:
        if relation == "simpler":
            f, p = f_test(r_rss * k, r_d, rss * k, d, m)
        else:
            f, p = f_test(rss * k, d, r_rss * k, r_d, m)
        r_aic, r_bic = (information(r_rss * k, m, r_d) if math.isfinite(r_rss)
                        else (math.inf, math.inf))  # fmt: skip
        tol = rss * (1.0 + 1e-9) + EXACT_FIT * ss
        note = UNDERFIT if relation == "richer" and not r_rss <= tol else ""
        rows.append(Rival(tuple(r_codes), tuple(r_names), relation, float(r_rss), int(r_d),
                          r_aic, r_bic, f, p, note))  # fmt: skip
    eligible = [r for r in rows if r.relation != "richer" or (r.p_value < alpha)]
    chosen = min(eligible, key=lambda r: (r.bic, r.n_params))
    size = f"{n} samples" if m == n else f"{n} samples, {m:.4g} effective"
    rule = (f"lowest BIC on the {part} ({size}) among the structure, its simpler "
            f"neighbours and the richer ones an F-test supports (p < {alpha:g})")  # fmt: skip
    return RivalTable(tuple(rows), int(n), part, chosen.codes, rule, alpha)


@dataclass(frozen=True)
class Evidence:
    """Everything above for one identified structure (``to_dict``: the result's ``evidence``)."""

    codes: tuple[int, ...]
    parameters: tuple[ParameterInterval, ...]
    sigma: float
    condition: float
    level: float
    residuals: ResidualAnalysis
    rivals: RivalTable | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def identifiable(self) -> bool:
        return all(p.identifiable for p in self.parameters)

    def to_dict(self) -> dict[str, Any]:
        return {
            "codes": list(self.codes), "level": self.level,
            "sigma": self.sigma, "condition": self.condition if math.isfinite(self.condition)
            else None, "identifiable": self.identifiable,
            "parameters": {p.name: p.to_dict() for p in self.parameters},
            "residuals": self.residuals.to_dict(),
            "rivals": self.rivals.to_dict() if self.rivals else None, "notes": list(self.notes),
        }  # fmt: skip

    def summary(self) -> str:
        """A few lines for people: intervals, the residual tests and the rival verdict."""
        pct = f"{100 * self.level:g} %"
        lines = [f"parameters with {pct} intervals (sigma {self.sigma:.3g}, condition "
                 f"{self.condition:.3g}):"]  # fmt: skip
        for p in self.parameters:
            flag = f"  [{p.note}]" if p.note else ""
            lines.append(f"  {p.name} = {p.value:.5g} +- {p.stderr:.2g} "
                         f"[{p.lower:.5g}, {p.upper:.5g}]{flag}")  # fmt: skip
        r = self.residuals
        verdict = ("exact fit (tests not applicable)" if r.passed is None
                   else "pass" if r.passed else "FAIL")  # fmt: skip
        lines.append(f"residual tests ({100 * r.confidence:g} %, lags <= "
                     f"{r.autocorrelation.lags[-1]}): {verdict}; autocorrelation worst "
                     f"{r.autocorrelation.worst:.3g} at lag {r.autocorrelation.worst_lag}, "
                     f"cross-correlation with the input worst {r.cross_correlation.worst:.3g} "
                     f"at lag {r.cross_correlation.worst_lag} (band "
                     f"{r.autocorrelation.family_band:.3g})")  # fmt: skip
        if self.rivals is not None:
            t = self.rivals
            pref = ",".join(map(str, t.preferred))
            lines.append(f"rivals: {'the structure is preferred' if t.agrees else f'{{{pref}}} is preferred'} "
                         f"({t.rule})")  # fmt: skip
        return "\n".join(lines + list(self.notes))

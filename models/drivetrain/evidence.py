"""How sure an identified drive-train structure is: the evidence a reviewer asks for.

Pure statistics on arrays (no Prefect/MLflow); ``models.drivetrain.fit_evidence`` applies them
to an identified structure on a recording (docs/methods.md §2.9).

- **Parameter uncertainty** (``models.drivetrain.intervals``, re-exported here): standard
  errors, marginal and simultaneous intervals of the output-error estimate.
- **Residual analysis** (:func:`residual_analysis`, as MATLAB's ``resid``): autocorrelation of
  the residual at lags 1..M and its cross-correlation with the input at lags 0..M, each with
  the per-lag band ``+-z/sqrt(N)`` (``z`` of ``confidence``) for the figure; the pass/fail uses
  the family band ``+-z_B/sqrt(N)`` with a Bonferroni ``z_B`` over the lags, so a white residual
  independent of the input fails at most at rate ``1 - confidence`` per test. Given the sample
  time, a third test looks for a periodic component the lags miss: Fisher's g on the
  residual's periodogram (``models.drivetrain.periodic``), at the same level.
- **Rival table** (:func:`rival_table`): the structure and its one-step neighbours with RSS,
  parameter count, AIC ``n ln(RSS/n) + 2d``, BIC ``n ln(RSS/n) + d ln n`` and the F-test of
  each nested pair; the preferred structure is the lowest BIC among the structure itself, its
  simpler neighbours, and the richer ones the F-test supports (``p < alpha``).
  ``search_evidence.search_rival_table``: the same rows judged by the search's own rule (its
  final stage with ``final_alpha``, ``models.drivetrain.gp.selection``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from models.drivetrain.intervals import (
    RANK_TOL,
    ParameterInterval,
    filter_adjoint,
    parameter_uncertainty,
)
from models.drivetrain.periodic import PeriodicTest, periodic_test

#: re-exported from ``models.drivetrain.intervals`` (callers import them from here)
__all__ = ["EXACT_FIT", "RANK_TOL", "UNDERFIT", "CorrelationTest", "Evidence",
           "ParameterInterval", "PeriodicTest", "ResidualAnalysis", "Rival", "RivalTable", "f_test",
           "filter_adjoint", "information", "parameter_uncertainty", "residual_analysis",
           "rival_table"]  # fmt: skip

EXACT_FIT = 1e-12  # residual sum of squares / output's: an exact (noise-free) fit
UNDERFIT = (
    "fits worse than the structure it contains: its identification stalled (or the "
    "added submodel cannot be switched off inside its box); not evidence either way"
)


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
    """Autocorrelation of the residual and its cross-correlation with the input (``resid``),
    and Fisher's periodic test (``periodic``; None without a sample time or samples enough).

    ``passed``: every test passes; None for an exact fit (residual at the numerical floor, the
    tests say nothing)."""

    n: int
    confidence: float
    autocorrelation: CorrelationTest
    cross_correlation: CorrelationTest
    passed: bool | None
    exact_fit: bool = False
    periodic: PeriodicTest | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "confidence": self.confidence, "passed": self.passed,
                "exact_fit": self.exact_fit,
                "autocorrelation": self.autocorrelation.to_dict(),
                "cross_correlation": self.cross_correlation.to_dict(),
                "periodic": self.periodic.to_dict() if self.periodic else None}  # fmt: skip


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
    dt: float | None = None,
) -> ResidualAnalysis:
    """Residual tests over lags up to ``max_lag`` (at most N/4): ``r_ee(k) = sum e_t e_{t+k} /
    sum e_t^2`` (k >= 1) and ``r_eu(k) = sum e_{t+k} u_t / sqrt(sum e^2 sum u^2)`` (k >= 0: the
    input leads the residual), both of the mean-removed series. Under "the residual is white and
    independent of the input" each is ~N(0, 1/N). ``output``: the measured output, to call a
    residual at the numerical floor an exact fit. ``dt``: the sample time (s), for Fisher's
    periodic test (``models.drivetrain.periodic``; without it, not run)."""
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
    periodic = None if dt is None or exact else periodic_test(e, dt, confidence)
    passed = None if exact else bool(a.passed and c.passed and (periodic is None
                                                                  or periodic.passed))  # fmt: skip
    return ResidualAnalysis(n, confidence, a, c, passed, exact, periodic)


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
        if r.periodic is not None:
            q = r.periodic
            lines.append(f"periodic component (Fisher's g): {'pass' if q.passed else 'FAIL'}; "
                         f"{q.describe()}")  # fmt: skip
        if self.rivals is not None:
            t = self.rivals
            pref = ",".join(map(str, t.preferred))
            lines.append(f"rivals: {'the structure is preferred' if t.agrees else f'{{{pref}}} is preferred'} "
                         f"({t.rule})")  # fmt: skip
        return "\n".join(lines + list(self.notes))

"""The search's structure choice by the data's evidence (issue 26, ``GPSettings.final_alpha``).

The paper's fitness ``1 / (RSS (1 + k_P d))`` charges every parameter a fixed factor in RSS
whatever the data: a ladder's three parameters per inertia cost a factor 1.2-3.4, so a truth
that fits 6-40 % better than a ladder with fewer inertias loses (docs/methods.md §2.8). Here the
fitness's answer stays the answer unless a *richer* structure (more parameters) fits
significantly better, by an F-test of the nested pair on the fitness RSS:

    F = ((RSS_a - RSS_b) / (d_b - d_a)) / (RSS_b / (n - d_b)),   p = P(F(d_b - d_a, n - d_b) > F)

with ``n`` the effective sample count (:func:`effective_count`) and the family-wise level
``alpha`` split over the richer candidates tested (Bonferroni: ``p < alpha / m``), so that a
correct answer moves by chance at most at rate ``alpha`` whatever the number of rivals. When
several richer ones are significant the fewest parameters win (then the lower RSS), and the
test repeats from there (:func:`choose`): a richer structure wins only when the data support it,
and one whose gain is within the noise does not. Only upward: a simpler structure is the
fitness's to choose (its penalty already favours it), and on coloured residuals (EMPS: lag-1
autocorrelation 0.996, 5 effective samples) no test is significant, so the fitness decides
as before.

The sample count. The fitness RSS is that of the prefiltered residual ``F(y_sim - y)``
(``IdentificationSettings.prefilter_hz``): white noise through the zero-phase low-pass keeps
about ``N 2 f_c / f_s`` independent samples, not ``N``. :func:`prefilter_count` computes it from
the filter's response: for ``r = F e`` with white ``e`` the RSS has mean ``s^2 sum G^2`` and
variance ``2 s^4 sum G^4`` (``G = |H|^2`` the forward-backward filter's response on the
record's DFT grid), a scaled chi-square with ``(sum G^2)^2 / sum G^4`` degrees of freedom
(Satterthwaite): ``N 2 f_c / f_s`` for an ideal low-pass, 150 for 3 s at 1 kHz and 25 Hz.
Residuals that are not white (model error, not noise) carry still fewer: the AR(1) count of
the answer's raw residual (``structure_fit.effective_samples``, as the evidence counts them)
when its whiteness test fails; the smaller of the two is used.

The friction gain (``gp.final_gain``). A fit whose friction tanh gain the final stage chose by
profiling counts it as a parameter: ``n_params`` is ``d + 1``, so the tests below use
``d + 1`` for it (profiling is a least-squares fit of one more parameter, the gain, nested
around the others: the RSS it reaches falls with it as with any fitted parameter). Two
caveats the F-test's ``p`` does not carry. (i) Nesting: a richer structure profiled over the
gain contains a simpler one fitted at any gain, but a richer one fitted at the preset's gain
does not contain a simpler one fitted at another gain: such a pair is not nested, and the test
is only a yardstick there (a richer fit that fits worse gets p = 1, one that fits better is
tested as if nested). (ii) A gain is not identified
where the friction it smooths vanishes (``M_C -> 0``): the null hypothesis then lies on the
boundary, where the F distribution is only approximate (conservative for counting the gain).

Pure functions of evaluations and arrays; ``finalists`` applies them in the search's final
stage, ``search_evidence`` to the rival table the user sees (the same rule on the same fits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.drivetrain.evidence import f_test
from models.drivetrain.gp import final_gain
from models.drivetrain.gp.evaluate import Evaluation, RecordingArrays
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.signals import initial_velocity, split_index


@dataclass(frozen=True)
class Step:
    """One move of :func:`choose`: from ``before`` to ``after`` (structures), the test's
    ``p`` against the level ``alpha / m`` over ``m`` richer candidates."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    p_value: float
    level: float
    m: int

    def to_dict(self) -> dict:
        return {"before": ",".join(self.before), "after": ",".join(self.after),
                "p_value": self.p_value, "level": self.level, "m": self.m}  # fmt: skip


def prefilter_count(n: int, cutoff_hz: float, dt: float) -> float:
    """Effective samples of ``n`` white-noise samples after the search's zero-phase prefilter
    (``gp.signals.lowpass``: 4th-order Butterworth, forward-backward) at ``cutoff_hz`` (module
    docstring); ``n`` when the filter is off (cutoff <= 0 or at/above Nyquist)."""
    if n < 2 or cutoff_hz <= 0 or cutoff_hz >= 0.5 / dt:
        return float(n)
    from scipy.signal import butter, sosfreqz

    sos = butter(4, cutoff_hz, fs=1.0 / dt, output="sos")
    freqs = np.abs(np.fft.fftfreq(n, dt))
    _, h = sosfreqz(sos, worN=freqs, fs=1.0 / dt)
    g2 = np.abs(h) ** 4  # (|H|^2)^2: the forward-backward filter's response, squared
    return float(np.sum(g2) ** 2 / np.sum(g2**2))


def residual_count(residual: np.ndarray, u: np.ndarray) -> float:
    """Effective samples of a raw residual (``structure_fit.effective_samples``: its length when
    it passes the whiteness test, the AR(1) count when not)."""
    from models.drivetrain.evidence import residual_analysis
    from models.drivetrain.structure_fit import effective_samples  # it imports this package

    e = np.asarray(residual, float)
    if e.size < 8 or not np.all(np.isfinite(e)):
        return float(e.size)
    return effective_samples(int(e.size), residual_analysis(e, np.asarray(u, float)))


def fitness_rss(ev: Evaluation, k_p: float | None = None) -> float:
    """The RSS eq. 19's fitness charged ``ev`` (``k_p``: the search's penalty factor): its
    own, or the fitness's floor where the fit lies below it (``evaluate.FLOOR`` of the
    output's sum of squares: below it the RSS is rounding, not fit; a noise-free recording's
    exact fits end there). ``k_p`` None: its own."""
    if k_p is None or not ev.fitness > 0:
        return ev.rss
    charged = 1.0 / (ev.fitness * (1.0 + k_p * ev.n_params))
    return charged if charged > ev.rss * (1.0 + 1e-9) else ev.rss


def at_floor(ev: Evaluation, k_p: float) -> bool:
    """Whether ``ev`` fits to the fitness's floor (:func:`fitness_rss`): no fit with as many
    parameters or more can then be fitter, nor a richer one significantly better."""
    return fitness_rss(ev, k_p) > ev.rss


def p_value(simple: Evaluation, rich: Evaluation, n_eff: float, k_p: float | None = None) -> float:
    """The F-test's p of ``rich`` against ``simple`` on the fitness RSS (:func:`fitness_rss`
    with ``k_p``; 1 when ``rich`` has no more parameters, does not fit better, or the count
    leaves no degrees of freedom)."""
    if rich.n_params <= simple.n_params:
        return 1.0
    rss_s, rss_r = fitness_rss(simple, k_p), fitness_rss(rich, k_p)
    _, p = f_test(rss_s, simple.n_params, rss_r, rich.n_params, n_eff)
    return float(p) if math.isfinite(p) else 1.0


def significant_richer(
    answer: Evaluation, candidates: Sequence[Evaluation], n_eff: float, alpha: float,
    k_p: float | None = None,
) -> tuple[list[tuple[Evaluation, float]], float, int]:  # fmt: skip
    """The candidates richer than ``answer`` (more parameters, another structure) that fit
    significantly better, with their p, ordered by (parameters, RSS, structure); the level
    ``alpha / m`` and ``m`` (richer candidates tested)."""
    richer = [ev for ev in candidates
              if ev.n_params > answer.n_params and ev.structure != answer.structure]  # fmt: skip
    m = len(richer)
    level = alpha / max(m, 1)
    tested = [(ev, p_value(answer, ev, n_eff, k_p)) for ev in richer]
    hits = [(ev, p) for ev, p in tested if p < level]
    hits.sort(key=lambda t: (t[0].n_params, t[0].rss, t[0].structure))
    return hits, level, m


def choose(
    answer: Evaluation, candidates: Sequence[Evaluation], n_eff: float, alpha: float,
    k_p: float | None = None,
) -> tuple[Evaluation, list[Step]]:  # fmt: skip
    """The fitness's ``answer`` moved while a richer candidate fits significantly better
    (module docstring): to the significant one with the fewest parameters (then the lowest
    RSS), again from there; ``alpha <= 0``: the answer unchanged; ``k_p``: RSS below the
    fitness's floor counted at it (:func:`fitness_rss`). Candidates should be full
    (refined) fits: a stalled fit of a simpler structure would make a richer one look better.
    Returns the choice and its moves."""
    steps: list[Step] = []
    if alpha <= 0:
        return answer, steps
    seen = {answer.structure}
    while True:
        hits, level, m = significant_richer(answer, candidates, n_eff, alpha, k_p)
        hits = [(ev, p) for ev, p in hits if ev.structure not in seen]
        if not hits:
            return answer, steps
        after, p = hits[0]
        steps.append(Step(answer.structure, after.structure, p, level, m))
        seen.add(after.structure)
        answer = after


def best_fits(evaluations: Sequence[Evaluation]) -> list[Evaluation]:
    """The fittest refined evaluation of each structure (the candidates of :func:`choose`),
    ordered by structure."""
    best: dict[tuple[str, ...], Evaluation] = {}
    for ev in evaluations:
        if ev.refined and (ev.structure not in best or ev.fitness > best[ev.structure].fitness):
            best[ev.structure] = ev
    return [best[k] for k in sorted(best)]


def search_count(best: Evaluation, data: RecordingArrays, settings: GPSettings) -> float:
    """The evidence's sample count of a search on ``data`` (module docstring): the prefilter's
    count of the fitness part, or fewer when ``best``'s raw velocity residual there (simulated
    as the identification does) is coloured."""
    from models.drivetrain.simulate import simulate

    n_fit = split_index(data.n, settings.test_fraction)
    part = slice(n_fit, None) if n_fit < data.n else slice(0, None)
    n = data.n - (n_fit if n_fit < data.n else 0)
    count = prefilter_count(n, settings.identification.prefilter_hz, data.dt)
    q = data.q if settings.identification.position_weight > 0 else None
    y = simulate(best.structure, data.u, data.dt, best.parameters,
                 y0=initial_velocity(data.y, q, data.dt), n_sub=best.n_sub,
                 **settings.kit_options())  # fmt: skip
    return min(count, residual_count((y - data.y)[part], data.u[part]))


def record(
    answer: Evaluation, evaluations: Sequence[Evaluation], n_eff: float, settings: GPSettings,
    steps: Sequence[Step],
) -> dict:  # fmt: skip
    """``StructureSearch.selection_``: the count, the level (0: the fitness alone), the number
    ``m`` of refined structures richer than the ``answer`` it was tested against, the moves;
    the answer's friction gain ``f_tanh`` and whether the final stage estimated it
    (``gain_estimated``: then ``n_params`` counts it, ``gp.final_gain``)."""
    m = sum(ev.n_params > answer.n_params for ev in best_fits(evaluations))
    return {"n_eff": n_eff, "alpha": settings.final_alpha if n_eff else 0.0, "m": int(m),
            "moves": [st.to_dict() for st in steps],
            "f_tanh": final_gain.gain_of(answer, settings.f_tanh),
            "gain_estimated": final_gain.estimated(answer)}  # fmt: skip

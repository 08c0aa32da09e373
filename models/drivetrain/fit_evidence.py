"""The evidence for an identified drive-train structure (docs/methods.md §2.9): what
``models.drivetrain.evidence``'s statistics need from the fit, and their application.

``structure_evidence`` puts ``models.drivetrain.evidence`` on an identified structure: the
exact Jacobian of the whole-record simulation at the estimate (the simulator of the search,
``models.drivetrain.simulate``), the raw velocity residual, and the rivals identified by
``models.drivetrain.structure_fit`` (one-step neighbours, ``operators.neighbours``). The
covariance is that of the velocity output error (with the prefilter's sandwich); with
``position_weight > 0`` the position rows of the objective are left out of it (an
approximation, noted in the result). What else moved the estimate with the noise is in it
too: the start velocity estimated from the same samples (:func:`start_noise`) and a friction
gain the fit chose (:func:`gain_column`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import numpy as np

from models.drivetrain.evidence import (
    Evidence,
    ParameterInterval,
    ResidualAnalysis,
    parameter_uncertainty,
    residual_analysis,
    rival_table,
)
from models.drivetrain.friction_gain import SMOOTHED
from models.drivetrain.gp.evaluate import Evaluation, RecordingArrays
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.signals import (
    POSITION_SAMPLES,
    initial_velocity,
    initial_velocity_weights,
    lowpass,
    split_index,
)
from models.drivetrain.intervals import at_bound
from models.drivetrain.simulate import CompiledSimulator, get_simulator
from models.drivetrain.spectrum import cutoff_above
from models.drivetrain.submodels import parse_structure

#: relative step of the friction gain's central difference (:func:`gain_column`): the
#: simulation is smooth in the gain, so the truncation error is ``O(step^2)``, the rounding
#: ``eps / step``, both below 1e-7 of the column
GAIN_STEP = 1e-4
#: an estimated friction gain's box for its identifiability flag: a decade either side (an
#: interval wider than that does not say which gain)
GAIN_BOX = 10.0


def simulator(
    structure: Sequence[str], data: RecordingArrays, settings: GPSettings,
    parameters: dict[str, float], n_sub: int | None = None,
) -> CompiledSimulator:  # fmt: skip
    """The whole-record simulator with the fit's ``n_sub`` substeps (None: the step-size
    rule's at ``parameters``, for parameters from elsewhere)."""
    ident = settings.identification
    return get_simulator(structure, data.n, data.dt, jit=ident.jit, jit_opt=ident.jit_opt,
                         jit_after=ident.jit_after, n_sub=n_sub, at=parameters,
                         **settings.kit_options())  # fmt: skip


def start_velocity(data: RecordingArrays, settings: GPSettings) -> float:
    """The initial velocity the identification simulates from (the same as its own, so that
    residuals, Jacobian and RSS here are those of the fit): ``gp.signals.initial_velocity``."""
    q = data.q if settings.identification.position_weight > 0 else None
    return float(initial_velocity(data.y, q, data.dt))


def starts_from_position(data: RecordingArrays, settings: GPSettings) -> bool:
    """Whether :func:`start_velocity` comes from the position (``initial_velocity``'s cubic:
    a fit with the position and at least ``POSITION_SAMPLES`` of it), not the velocity."""
    q = data.q if settings.identification.position_weight > 0 else None
    return q is not None and q.size >= POSITION_SAMPLES


def structure_evidence(
    structure: Sequence[str], parameters: dict[str, float], data: RecordingArrays,
    settings: GPSettings, rivals: Sequence[tuple[Evaluation, str]] = (), *,
    level: float = 0.95, confidence: float = 0.99, max_lag: int = 25, alpha: float = 0.01,
    n_sub: int | None = None, gain_estimated: bool = False,
) -> Evidence:  # fmt: skip
    """The evidence for ``structure`` at ``parameters`` on ``data`` (module docstring): the
    covariance from the identification part, the residual tests and the rival table on the
    held-out tail when the settings hold one out (else the whole record). ``n_sub``: the
    substeps the parameters were fitted with (None: the step-size rule's at ``parameters``);
    each rival simulates with its own fit's. ``gain_estimated``: the friction gain
    ``settings.f_tanh`` was chosen from these data too (a profiled fit): it is one more
    parameter of the covariance (:func:`gain_column`), listed as ``f_tanh``, so every
    interval carries its uncertainty (a structure without smoothed friction has none)."""
    kinds = parse_structure(list(structure))
    names = tuple(k.value for k in kinds)
    n_fit = split_index(data.n, settings.test_fraction)
    sim = simulator(names, data, settings, parameters, n_sub)
    p = sim.model.values(parameters)
    y_sim, jac = sim.simulate_with_jacobian(p, data.u, start_velocity(data, settings))
    notes = []
    if not (np.all(np.isfinite(y_sim)) and np.all(np.isfinite(jac))):
        notes.append(
            "the simulation at the estimate is not finite everywhere: intervals unreliable"
        )
        y_sim, jac = np.nan_to_num(y_sim), np.nan_to_num(jac)
    if settings.identification.position_weight > 0 and data.q is not None:
        notes.append("intervals from the velocity error only (the fit also matched position)")
    e = y_sim - data.y
    specs = sim.model.specs
    labels, boxes = [s.name for s in specs], [(s.lower, s.upper) for s in specs]
    start = start_noise(sim, p, data, settings, n_fit)
    if gain_estimated and SMOOTHED & set(names):
        g = settings.f_tanh
        column = gain_column(names, data, settings, parameters, sim.n_sub)
        jac, p = np.column_stack([jac, np.nan_to_num(column)]), np.append(p, g)
        labels, boxes = [*labels, "f_tanh"], [*boxes, (g / GAIN_BOX, g * GAIN_BOX)]
    intervals, sigma, cond = parameter_uncertainty(
        jac[:n_fit], e[:n_fit], p, labels, boxes,
        prefilter=lowpass(settings.identification.prefilter_hz, data.dt), level=level,
        notes=notes, start=start,
    )  # fmt: skip
    part, part_name = tested_part(data, settings)
    resid = residual_analysis(e[part], data.u[part], max_lag=max_lag, confidence=confidence,
                              output=data.y[part], dt=data.dt)  # fmt: skip
    n_eff = effective_samples(int(e[part].size), resid)
    if resid.passed is False:  # say what a FAIL means for the answer, where the user reads it
        notes.append(failure_note(resid, settings.identification.prefilter_hz, data.dt))
    if n_eff < e[part].size:  # coloured residuals: the white-noise formulas are too sure
        factor = float(np.sqrt(e[part].size / n_eff))
        intervals = widened(intervals, factor)
        notes.append(f"the residuals are not white (lag-1 autocorrelation "
                     f"{resid.autocorrelation.values[0]:.3g}): intervals widened {factor:.3g}x "
                     f"and the rivals judged on {n_eff:.4g} effective samples")  # fmt: skip
    table = None
    if rivals:
        codes = tuple(k.code for k in kinds)
        rows = []
        y0 = start_velocity(data, settings)
        for ev, relation in rivals:
            r_sim = simulator(ev.structure, data, settings, ev.parameters, ev.n_sub)
            y_r = r_sim.simulate(r_sim.model.values(ev.parameters), data.u, y0)
            r = (y_r - data.y)[part]
            rss = float(r @ r) if np.all(np.isfinite(r)) else np.inf
            rows.append((ev.codes, ev.structure, rss, ev.n_params, relation))
        best = (codes, names, float(e[part] @ e[part]), len(specs))
        y_part = data.y[part]
        ss = float(np.sum((y_part - y_part.mean()) ** 2))
        table = rival_table(best, rows, int(e[part].size), part=part_name, alpha=alpha, ss=ss,
                            n_eff=n_eff)  # fmt: skip
    return Evidence(tuple(k.code for k in kinds), tuple(intervals), sigma, cond, level, resid,
                    table, tuple(notes))  # fmt: skip


def tested_part(data: RecordingArrays, settings: GPSettings) -> tuple[slice, str]:
    """The part of the record the residual tests and the rivals are judged on: the held-out
    tail where the settings hold one out, else the whole record."""
    n_fit = split_index(data.n, settings.test_fraction)
    return (slice(n_fit, None), "held-out tail") if n_fit < data.n else (slice(0, None),
                                                                          "whole record")  # fmt: skip


def answer_residuals(
    ev: Evaluation, data: RecordingArrays, settings: GPSettings, *, max_lag: int = 25,
    confidence: float = 0.99,
) -> ResidualAnalysis:  # fmt: skip
    """The residual tests :func:`structure_evidence` reports (same part, lags and level), of a
    search's fit ``ev`` at its own friction gain and substeps (``passed`` None for an exact
    fit, False where the simulation is not finite)."""
    from models.drivetrain.gp.final_gain import gain_of  # the gp package imports this module

    at = replace(settings, f_tanh=gain_of(ev, settings.f_tanh))
    sim = simulator(ev.structure, data, at, ev.parameters, ev.n_sub)
    y = sim.simulate(sim.model.values(ev.parameters), data.u, start_velocity(data, at))
    part, _ = tested_part(data, at)
    return residual_analysis((y - data.y)[part], data.u[part], max_lag=max_lag,
                             confidence=confidence, output=data.y[part], dt=data.dt)  # fmt: skip


def wider_cutoff(resid: ResidualAnalysis, prefilter_hz: float, dt: float) -> float | None:
    """The prefilter cut-off that shows what the residual tests found, where Fisher's periodic
    test fails with its peak above a prefilter ``prefilter_hz`` > 0: ``spectrum.cutoff_above``
    of the peak (0.0: no prefilter); else None (nothing periodic, or inside the band the fit
    looks at)."""
    q = resid.periodic
    if (
        resid.exact_fit
        or not prefilter_hz
        or q is None
        or q.passed
        or q.frequency_hz <= prefilter_hz
    ):
        return None
    return cutoff_above(q.frequency_hz, dt)


def failure_note(resid: ResidualAnalysis, prefilter_hz: float, dt: float) -> str:
    """What failed residual tests mean for the answer: the worst lags, a periodic component's
    frequency, and, where that lies above the prefilter the fit looked through, the cut-off
    that would show it (``spectrum.cutoff_above``; ``--prefilter`` of ``drive identify`` and
    ``drive fit``, the form's *prefilter*)."""
    a, c, q = resid.autocorrelation, resid.cross_correlation, resid.periodic
    head = (f"the residual tests fail (autocorrelation {a.worst:.3g} at lag {a.worst_lag}, "
            f"cross-correlation with the input {c.worst:.3g} at lag {c.worst_lag}; band "
            f"+-{a.family_band:.3g}")  # fmt: skip
    hint = (f"perhaps acting above the {prefilter_hz:g} Hz prefilter" if prefilter_hz
            else "perhaps a mode or a loop")  # fmt: skip
    if q is not None and not q.passed:
        head += f"; a periodic component ({q.describe()})"
        cut = wider_cutoff(resid, prefilter_hz, dt)
        if cut is not None:
            hint = (f"acting above the {prefilter_hz:g} Hz prefilter, where the fit does not "
                    f"look: identify again with --prefilter {cut:g}"
                    + (" (no prefilter)" if cut == 0 else ""))  # fmt: skip
        else:  # inside the band the fit looks at: a mode or loop there, missing or misplaced
            hint = f"or misplaced: a mode or a loop near {q.frequency_hz:.3g} Hz"
    return (
        f"{head}): the recording shows dynamics this structure does not model (a part "
        f"missing, {hint}; or another friction shape); the intervals and rivals assume it "
        f"complete"
    )


def residuals_white(data: RecordingArrays, settings: GPSettings) -> Callable[[Evaluation], bool]:
    """``ev -> bool``: whether a search's fit passes :func:`answer_residuals` (the final
    stage's ``white``, ``finalists.P_REFIT``); a simulation that fails counts as not white
    (the rule then stays off: whatever went wrong, the refits run as without it)."""

    def white(ev: Evaluation) -> bool:
        try:
            return answer_residuals(ev, data, settings).passed is True
        except Exception:  # a rule that only saves time must not end the search
            return False

    return white


def gain_column(
    structure: Sequence[str], data: RecordingArrays, settings: GPSettings,
    parameters: dict[str, float], n_sub: int, step: float = GAIN_STEP,
) -> np.ndarray:  # fmt: skip
    """``dy_sim / df_tanh`` at ``parameters``: central differences over the friction gain (a
    model constant of the compiled simulator) with relative ``step``, at the fit's ``n_sub``
    substeps, interpreted (two simulations; no native build per gain)."""
    g, y0 = settings.f_tanh, start_velocity(data, settings)
    ident = replace(settings.identification, jit=False)
    out = []
    for factor in (1.0 + step, 1.0 - step):
        at = replace(settings, f_tanh=g * factor, identification=ident)
        sim = simulator(structure, data, at, parameters, n_sub)
        out.append(sim.simulate(sim.model.values(parameters), data.u, y0))
    return (out[0] - out[1]) / (2.0 * g * step)


def start_noise(
    sim: CompiledSimulator, p: np.ndarray, data: RecordingArrays, settings: GPSettings,
    n_fit: int,
) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """``(j0, c)`` for ``evidence.parameter_uncertainty(start=...)`` (``sim`` at ``p``, the
    structure's simulator and parameters) when the simulation starts
    from a velocity estimated from the velocity samples themselves (no position in the fit):
    ``j0`` the output's sensitivity to it over the first ``n_fit`` samples (central
    differences), ``c`` the estimate's weights. None when it comes from the position (an
    encoder's position is nearly exact) or the record is too short for the quadratic."""
    if starts_from_position(data, settings):
        return None
    c = initial_velocity_weights(data.n)
    if c.size < 5 or n_fit < c.size:
        return None
    y0 = start_velocity(data, settings)
    h = 1e-6 * max(float(np.max(np.abs(data.y))), 1e-12)
    j0 = (sim.simulate(p, data.u, y0 + h) - sim.simulate(p, data.u, y0 - h)) / (2.0 * h)
    return np.nan_to_num(j0[:n_fit]), c


def effective_samples(n: int, residuals: ResidualAnalysis) -> float:
    """``N (1 - r1) / (1 + r1)`` (AR(1) residuals, ``r1`` their lag-1 autocorrelation clipped
    to [0, 0.999]) when the autocorrelation test fails, else ``N``: an error correlated over
    ``(1 + r1) / (1 - r1)`` samples carries one sample's information per that many."""
    if residuals.passed is None or residuals.autocorrelation.passed:
        return float(n)
    r1 = min(max(residuals.autocorrelation.values[0], 0.0), 0.999)
    return n * (1.0 - r1) / (1.0 + r1)


def widened(intervals: Sequence[ParameterInterval], factor: float) -> list[ParameterInterval]:
    """The intervals ``factor`` times wider (standard errors with it), flagged when wider than
    their box."""
    out = []
    for p in intervals:
        se, lo, hi = p.stderr * factor, p.value - (p.value - p.lower) * factor, p.value + (
            p.upper - p.value) * factor  # fmt: skip
        note = p.note
        if p.identifiable and hi - lo > p.box[1] - p.box[0]:
            note = "not identifiable: its interval is wider than its box"
        out.append(replace(p, stderr=se, lower=lo, upper=hi, note=note,
                           joint_lower=p.value - (p.value - p.joint_lower) * factor,
                           joint_upper=p.value + (p.joint_upper - p.value) * factor,
                           identifiable=not note.startswith("not identifiable")))  # fmt: skip
    return out


def narrow_boxes_note(evidence: Evidence, typed: Collection[str] = ()) -> Evidence:
    """``evidence`` from the ``data`` preset's narrow boxes (``Scales.nominals``), with a note
    where a parameter ended on a bound of its box: the narrow boxes may exclude the machine,
    the wide ones hold any split of the inertia and springs over decades (``--boxes wide``).
    ``typed``: parameters whose boxes the user drew (a nominal typed: 50..200 % either way)."""
    bound = [p.name for p in evidence.parameters  # (whatever its note: the bound first)
             if p.name not in typed and at_bound(p.value, p.box)]  # fmt: skip
    if not bound:
        return evidence
    note = (f"{', '.join(bound)} ended on a bound of the narrow boxes (the data preset's "
            "default, drawn for machines like the paper's): they may exclude this machine; "
            "--boxes wide draws them over decades (docs/drive.md, \"Other machines\")")  # fmt: skip
    return replace(evidence, notes=(*evidence.notes, note))


def time_limit_note(
    evidence: Evidence, timed_out: Sequence[str], limit_s: float, what: str = "",
    work_limit: float = 0.0,
) -> Evidence:  # fmt: skip
    """``evidence`` with a note where identifications stopped at their time limit
    (``timed_out``: one structure per stopped identification, ``StructureSearch.timed_out_``;
    ``what``: the note's first words, e.g. which fits): each kept its best point so far, and
    where the limit falls depends on the machine's load, so the answer (or a rival's row) may
    differ between runs of the same seed. With a ``work_limit`` (``IdentificationSettings``)
    a stop may be either limit's: the work limit's falls at the same point on any machine."""
    if not timed_out:
        return evidence
    names = sorted(set(timed_out))
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    n = len(timed_out)
    which = "their rows" if what else "this answer"
    head = f"{what}{n} identification{'s' if n > 1 else ''} stopped at "
    if work_limit:
        note = (f"{head}the work or time limit ({work_limit:.3g} state updates or {limit_s:g} "
                f"s; {shown}) with the best point so far: the work limit falls at the same "
                f"point on any machine; where the time limit falls depends on the machine's "
                f"load, so where it stopped one, {which} may differ between runs of the same "
                f"seed")  # fmt: skip
    else:
        note = (f"{head}the time limit ({limit_s:g} s; {shown}) with the best point so far: "
                f"where a limit falls depends on the machine's load, so {which} may differ "
                f"between runs of the same seed")  # fmt: skip
    return replace(evidence, notes=(*evidence.notes, note))

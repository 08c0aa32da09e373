"""Identify a named structure, and the evidence for an identified one (docs/methods.md §2.9).

``StructureFit`` (scikit-learn style) identifies the parameters of one structure the engineer
names (``greylab drive fit --structure S``) with the search's settings, from the parameters'
nominals: one identification without screening (every start gets the full budget), then a
continuation (one more full-budget start from the best point). Its fitted attributes mirror
``StructureSearch``'s, so the flow, the recorder and the registered model treat both alike.

``structure_evidence`` puts ``models.drivetrain.evidence`` on an identified structure: the
exact Jacobian of the whole-record simulation at the estimate (the simulator of the search,
``models.drivetrain.simulate``), the raw velocity residual, and the one-step neighbours
(``operators.neighbours``) identified with one full-budget start from the structure's
parameters (a neighbour the search already refined keeps that fit). The covariance is that of
the velocity output error (with the prefilter's sandwich); with ``position_weight > 0`` the
position rows of the objective are left out of it (an approximation, noted in the result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from methods.errors import InputError
from models.drivetrain.evidence import (
    Evidence,
    ParameterInterval,
    ResidualAnalysis,
    parameter_uncertainty,
    residual_analysis,
    rival_table,
)
from models.drivetrain.friction_gain import SMOOTHED, profile_friction_gain
from models.drivetrain.gp.dispatch import MapBatches, serial_map
from models.drivetrain.gp.evaluate import (
    Evaluation,
    IndividualSpec,
    RecordingArrays,
    evaluate_batch,
    identify,
    refinement,
)
from models.drivetrain.gp.operators import (
    extensions,
    from_structure,
    simplifications,
    switched_off,
)
from models.drivetrain.gp.recording import RecordingFile, as_arrays, evaluate_stored
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.gp.signals import (
    initial_velocity,
    initial_velocity_weights,
    lowpass,
    split_index,
)
from models.drivetrain.kit import assemble
from models.drivetrain.product import DriveModel
from models.drivetrain.simulate import CompiledSimulator, get_simulator
from models.drivetrain.submodels import parse_structure

#: relative step of the friction gain's central difference (:func:`gain_column`): the
#: simulation is smooth in the gain, so the truncation error is ``O(step^2)``, the rounding
#: ``eps / step``, both below 1e-7 of the column
GAIN_STEP = 1e-4
#: an estimated friction gain's box for its identifiability flag: a decade either side (an
#: interval wider than that does not say which gain)
GAIN_BOX = 10.0
#: starts of a named structure's identification (the search's own ``n_starts`` if larger)
FIT_STARTS = 8
#: a named structure's fit continues in the backlash smoothing and from one inertia fewer
#: (``IdentificationSettings``; off in a search, for its time), with rounds of 100 evaluations
#: (40: a four-mass's fit crept along a valley, < 1 % per round, and stopped at 1e-3 of
#: ``sum y^2``; with 100 exact, ``drive_recovery kit``) and a time limit of 600 s (a four-mass
#: with backlash fits a three- and a two-mass first: 120 s cut it short at load 5 on 2 cores)
CONTINUATION: dict[str, Any] = {
    "backlash_smoothing": (0.03, 0.003, 0.0003), "ladder_seed": True, "max_nfev": 100,
    "time_limit_s": 600.0,
}  # fmt: skip
#: starts of each rival spec's identification (from its start values; a richer neighbour has
#: two specs): 4 instead of 1 tripled the time of the reference's evidence, no verdict changed
RIVAL_STARTS = 1


def _simulator(
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


def rival_specs(
    structure: Sequence[str], parameters: dict[str, float], settings: GPSettings,
    known: dict[tuple[str, ...], dict[str, float]] | None = None,
) -> list[tuple[IndividualSpec, str]]:  # fmt: skip
    """The one-step neighbours of ``structure`` as specs with their relation, simpler or
    richer: a start from the inherited parameters (or ``known`` ones; the added ones at their
    nominals) and, for a richer one, a second start with the added submodel nearly switched
    off (``operators.switched_off``), from which the fit begins next to the structure's own."""
    centre = from_structure(structure, parameters, settings)
    out: list[tuple[IndividualSpec, str]] = []
    seen = {centre.structure}
    for relation, inds in (("simpler", simplifications(centre, settings)),
                           ("richer", extensions(centre, settings))):  # fmt: skip
        for ind in sorted(inds, key=lambda i: i.structure):
            if ind.structure in seen:
                continue
            seen.add(ind.structure)
            start = (known or {}).get(ind.structure, ind.parameters)
            out.append((IndividualSpec(ind.structure, tuple(sorted(start.items()))), relation))
            if relation == "richer":
                off = switched_off(ind.structure, ind.parameters, set(parameters), settings)
                out.append((IndividualSpec(ind.structure, tuple(sorted(off.items()))), relation))
    return out


def identify_rivals(
    specs: list[tuple[IndividualSpec, str]], data: RecordingArrays, settings: GPSettings,
    seed: int, map_batches: MapBatches | None = None, n_batches: int = 2,
    stored: RecordingFile | None = None,
) -> list[tuple[Evaluation, str]]:  # fmt: skip
    """Identify the rivals, each spec with ``RIVAL_STARTS`` full-budget start from its start
    values (``map_batches(fn, batches)``: any map, e.g. the flow's
    tasks; with ``stored`` the batches carry the file's path and hash, not the arrays); the
    fittest evaluation of each structure, in the order of ``specs``."""
    if not specs:
        return []
    import functools

    s = fit_settings(settings)
    s = replace(s, identification=replace(s.identification, n_starts=RIVAL_STARTS))
    fn: Callable[[list[IndividualSpec]], list[Evaluation]]
    if stored is not None:
        fn = functools.partial(evaluate_stored, recording=stored, settings=s, seed=seed)
    else:
        fn = functools.partial(evaluate_batch, data=data, settings=s, seed=seed)
    k = max(1, min(n_batches, len(specs)))
    batches = [[sp for sp, _ in specs[i::k]] for i in range(k)]
    results = (map_batches or serial_map)(fn, batches)
    best: dict[tuple[str, ...], Evaluation] = {}
    for ev in (ev for batch in results for ev in batch):
        if ev.structure not in best or ev.fitness > best[ev.structure].fitness:
            best[ev.structure] = ev
    relation = {_names(sp.structure): rel for sp, rel in specs}
    return [(best[name], rel) for name, rel in relation.items()]


def _names(structure: Sequence[str]) -> tuple[str, ...]:
    return tuple(k.value for k in parse_structure(list(structure)))


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
    sim = _simulator(names, data, settings, parameters, n_sub)
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
    part = slice(n_fit, None) if n_fit < data.n else slice(0, None)
    part_name = "held-out tail" if n_fit < data.n else "whole record"
    resid = residual_analysis(e[part], data.u[part], max_lag=max_lag, confidence=confidence,
                              output=data.y[part])  # fmt: skip
    n_eff = effective_samples(int(e[part].size), resid)
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
            r_sim = _simulator(ev.structure, data, settings, ev.parameters, ev.n_sub)
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
        sim = _simulator(structure, data, at, parameters, n_sub)
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
    if settings.identification.position_weight > 0 and data.q is not None:
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


def fit_settings(settings: GPSettings, n_starts: int = FIT_STARTS) -> GPSettings:
    """The search's settings for one named structure: no screening, at least ``n_starts``,
    and the continuations (:data:`CONTINUATION`, ``models.drivetrain.gp.continuation``)."""
    ident = continued(settings).identification
    return replace(settings, identification=replace(
        ident, screen_nfev=0, n_starts=max(ident.n_starts, n_starts)))  # fmt: skip


def continued(settings: GPSettings) -> GPSettings:
    """``settings`` with the identification's continuations on (:data:`CONTINUATION`)."""
    return replace(settings, identification=replace(settings.identification, **CONTINUATION))


class StructureFit:
    """Identify one named structure with the evidence (module docstring).

    Fitted attributes as ``StructureSearch``'s (``best_structure_``, ``best_codes_``,
    ``best_parameters_``, ``best_fitness_``, ``best_rss_``, ``best_evaluation_``, ``history_``
    and ``polish_`` empty, ``population_history_`` one row, ``state_space_``,
    ``best_output_``, ``model_``, ``n_evaluations_``, ``resumed_from_`` None) plus
    ``evidence_`` (``models.drivetrain.evidence.Evidence``)."""

    def __init__(
        self, structure: Sequence[str] | str, *, settings: GPSettings | None = None,
        seed: int = 0, n_starts: int = FIT_STARTS, map_batches: MapBatches | None = None,
        rivals: bool = True, progress: Callable[[str], None] | None = None,
        friction_gain: str = "fixed",
    ) -> None:  # fmt: skip
        self.structure = tuple(k.value for k in parse_structure(structure))
        self.settings = settings or GPSettings()
        for kind in self.structure:
            if kind not in self.settings.allowed:
                raise InputError(f"structure element {kind!r} is not in the allowed function "
                                 f"set ({', '.join(self.settings.allowed)})")  # fmt: skip
        if friction_gain not in ("fixed", "profile"):
            raise InputError(f"friction_gain must be 'fixed' or 'profile', got {friction_gain!r}")
        self.seed, self.n_starts, self.rivals = int(seed), int(n_starts), rivals
        self.map_batches, self.progress, self.friction_gain = map_batches, progress, friction_gain

    def fit(self, recording: Any) -> StructureFit:
        """``friction_gain="profile"``: the friction tanh gain chosen by profiling the fit
        (``models.drivetrain.friction_gain``; ``gain_profile_``, and every result of the fit,
        use the chosen gain), else ``settings.f_tanh`` (``gain_profile_`` None)."""
        data, settings = as_arrays(recording), self.settings
        start = tuple(sorted((sp.name, sp.nominal) for k in self.structure
                             for sp in settings.specs(k)))  # fmt: skip
        self.gain_profile_ = None
        if self.friction_gain == "profile":
            spec = IndividualSpec(self.structure, start)
            self.gain_profile_ = profile_friction_gain(
                spec, data, fit_settings(settings, self.n_starts), self.seed)  # fmt: skip
            self.settings = replace(settings, f_tanh=self.gain_profile_.f_tanh)
        s = fit_settings(self.settings, self.n_starts)
        first = identify(IndividualSpec(self.structure, start), data, s, self.seed)
        again = identify(refinement(first), data, s, self.seed)  # continuation from the best
        best = again if again.fitness >= first.fitness else first
        n_eval = 2
        rivals: list[tuple[Evaluation, str]] = []
        if self.rivals:
            if self.progress:
                self.progress("identifying the one-step neighbours")
            specs = rival_specs(best.structure, best.parameters, self.settings)
            stored = recording if isinstance(recording, RecordingFile) else None
            rivals = identify_rivals(specs, data, self.settings, self.seed, self.map_batches,
                                     stored=stored)  # fmt: skip
            n_eval += len(rivals)
        self.evidence_ = structure_evidence(
            best.structure, best.parameters, data, self.settings, rivals, n_sub=best.n_sub,
            gain_estimated=self.gain_profile_ is not None)  # fmt: skip
        self._finish(best, data, n_eval)
        return self

    def _finish(self, best: Evaluation, data: RecordingArrays, n_eval: int) -> None:
        self.best_evaluation_ = best
        self.best_structure_, self.best_codes_ = list(best.structure), list(best.codes)
        self.best_parameters_ = dict(best.parameters)
        self.best_fitness_, self.best_rss_ = float(best.fitness), float(best.rss)
        self.n_evaluations_, self.resumed_from_ = n_eval, None
        self.history_ = pd.DataFrame(columns=["generation", "best_fitness", "overall_best_fitness"])
        self.polish_ = pd.DataFrame(columns=["round", "codes", "names", "fitness", "rss",
                                             "n_params", "refined", "chosen"])  # fmt: skip
        self.population_history_ = pd.DataFrame([{
            "generation": 0, "index": 0, "codes": ",".join(map(str, best.codes)),
            "names": ",".join(best.structure), "fitness": best.fitness, "rss": best.rss,
            "n_params": best.n_params, "nfev": best.nfev, "wall_s": best.wall_s,
            "refined": True, "parameters": best.parameters}])  # fmt: skip
        kit = self.settings.kit_options()
        self.state_space_ = assemble(best.structure, **kit).numeric(best.parameters)
        sim = _simulator(best.structure, data, self.settings, best.parameters, best.n_sub)
        self.best_output_ = sim.simulate(
            sim.model.values(best.parameters), data.u, start_velocity(data, self.settings)
        )
        self.model_ = DriveModel.from_settings(
            best.structure,
            best.parameters,
            self.settings,
            data.dt,
            source=f"StructureFit {{{','.join(map(str, best.codes))}}} seed {self.seed}",
            n_sub=best.n_sub,
        )

    def summary(self) -> str:
        return (f"{self.best_codes_} {self.best_structure_}: fitness {self.best_fitness_:.4g}, "
                f"RSS {self.best_rss_:.4g}\n" + self.evidence_.summary())  # fmt: skip

    def to_dict(self) -> dict:
        return {"best_structure": self.best_structure_, "best_codes": self.best_codes_,
                "parameters": self.best_parameters_, "rss": self.best_rss_,
                "fitness": self.best_fitness_, "generations": 0, "fit": True,
                "settings": self.settings.to_dict(), "seed": self.seed,
                "state_space": self.state_space_,
                "evidence": self.evidence_.to_dict(),
                "friction_gain": self.gain_profile_ and self.gain_profile_.to_dict()}  # fmt: skip

"""Identify a named structure, and the evidence for an identified one (docs/methods.md §2.9).

``StructureFit`` (scikit-learn style) identifies the parameters of one structure the engineer
names (``greylab drive fit --structure S``) with the search's settings, from the parameters'
nominals: one identification without screening (every start gets the full budget), then a
continuation (one more full-budget start from the best point). Its fitted attributes mirror
``StructureSearch``'s, so the flow, the recorder and the registered model treat both alike.

The evidence itself (intervals, residual tests, the rival table) is
``models.drivetrain.fit_evidence``'s ``structure_evidence``, re-exported here; the rivals are
the one-step neighbours (``operators.neighbours``) identified with one full-budget start from
the structure's parameters (a neighbour the search already refined keeps that fit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from methods.errors import InputError
from models.drivetrain.fit_evidence import (
    effective_samples,
    simulator,
    start_velocity,
    structure_evidence,
    time_limit_note,
    widened,
)
from models.drivetrain.friction_gain import profile_friction_gain
from models.drivetrain.gp.dispatch import MapBatches, serial_map
from models.drivetrain.gp.evaluate import (
    Evaluation,
    IndividualSpec,
    RecordingArrays,
    evaluate_batch,
    identify,
    refinement,
    stopped,
)
from models.drivetrain.gp.operators import (
    extensions,
    from_structure,
    simplifications,
    switched_off,
)
from models.drivetrain.gp.recording import RecordingFile, as_arrays, evaluate_stored
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.kit import assemble
from models.drivetrain.product import DriveModel
from models.drivetrain.submodels import parse_structure

#: starts of a named structure's identification (the search's own ``n_starts`` if larger)
FIT_STARTS = 8
#: a named structure's fit continues from one inertia fewer (``IdentificationSettings``; off
#: in a search, for its time; no backlash smoothing: the exact gap law's sensitivities carry
#: its impacts, ``models.drivetrain.gap``), with rounds of 100 evaluations
#: (40: a four-mass's fit crept along a valley, < 1 % per round, and stopped at 1e-3 of
#: ``sum y^2``; with 100 exact, ``drive_recovery kit``) and a time limit of 600 s (a four-mass
#: with backlash fits a three- and a two-mass first: 120 s cut it short at load 5 on 2 cores)
CONTINUATION: dict[str, Any] = {
    "ladder_seed": True, "max_nfev": 100, "time_limit_s": 600.0,
}  # fmt: skip
#: a named structure's work limit, where the search's settings set one, is this many times
#: the search's (``IdentificationSettings.work_limit``; as its 600 s are 5x a search's 120 s)
CONTINUATION_WORK = 5.0
#: starts of each rival spec's identification (from its start values; a richer neighbour has
#: two specs): 4 instead of 1 tripled the time of the reference's evidence, no verdict changed
RIVAL_STARTS = 1
#: re-exported: the evidence's functions lived here first (callers import them from here)
__all__ = ["CONTINUATION", "FIT_STARTS", "RIVAL_STARTS", "StructureFit", "continued",
           "effective_samples", "fit_settings", "identify_rivals", "rival_specs",
           "start_velocity", "structure_evidence", "widened"]  # fmt: skip


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


def fit_settings(settings: GPSettings, n_starts: int = FIT_STARTS) -> GPSettings:
    """The search's settings for one named structure: no screening, at least ``n_starts``,
    and the continuations (:data:`CONTINUATION`, ``models.drivetrain.gp.continuation``)."""
    ident = continued(settings).identification
    return replace(settings, identification=replace(
        ident, screen_nfev=0, n_starts=max(ident.n_starts, n_starts)))  # fmt: skip


def continued(settings: GPSettings) -> GPSettings:
    """``settings`` with the identification's continuations on (:data:`CONTINUATION`, and
    :data:`CONTINUATION_WORK` times the work limit: a search's settings in, once)."""
    ident = settings.identification
    return replace(settings, identification=replace(
        ident, **CONTINUATION, work_limit=ident.work_limit * CONTINUATION_WORK))  # fmt: skip


class StructureFit:
    """Identify one named structure with the evidence (module docstring).

    Fitted attributes as ``StructureSearch``'s (``best_structure_``, ``best_codes_``,
    ``best_parameters_``, ``best_fitness_``, ``best_rss_``, ``best_evaluation_``, ``history_``
    and ``polish_`` empty, ``population_history_`` one row, ``state_space_``,
    ``best_output_``, ``model_``, ``n_evaluations_``, ``timed_out_``, ``resumed_from_`` None)
    plus ``evidence_`` (``models.drivetrain.evidence.Evidence``)."""

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
        self.timed_out_ = ["+".join(self.structure)] * len(  # the gain's profile: each gain
            self.gain_profile_.timed_out if self.gain_profile_ else ()
        )
        self.timed_out_ += stopped([first, again] + [ev for ev, _ in rivals])  # (rivals: fittest)
        self.evidence_ = time_limit_note(self.evidence_, self.timed_out_,
                                         s.identification.time_limit_s,
                                         work_limit=s.identification.work_limit)  # fmt: skip
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
        sim = simulator(best.structure, data, self.settings, best.parameters, best.n_sub)
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
                "friction_gain": self.gain_profile_ and self.gain_profile_.to_dict(),
                "timed_out": self.timed_out_}  # fmt: skip

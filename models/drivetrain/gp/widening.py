"""The search once more at a wider prefilter (``GPSettings.widen_prefilter``; docs/methods.md
§2.4, "The prefilter widened").

The search fits the prefiltered output error (25 Hz by default), so a part acting above the
cut-off (a mode at 52 Hz, a current loop's corner) is invisible to its fitness, and a
structure without it is the fittest. The raw residual still carries it: where the answer's
residual fails Fisher's periodic test (``models.drivetrain.periodic``, at the level of the
residual tests) with its peak above the cut-off, the search runs again at the cut-off that
shows the peak (``fit_evidence.wider_cutoff``: twice the peak, or no prefilter above a
quarter of the sampling rate), once, with stiffness and damping boxes that hold a mode at the
peak (:func:`with_mode_at`: the scales drew them around the resonance the recording's
spectrum showed, below the prefilter; seed-1 #5 of the recovery benchmark, a 54 Hz mode,
had its stiffness 2.6x above the box's top). Its answer stands where it explains what the first left:
its own residual passes Fisher's test (:func:`judged`); else the first answer stands (a peak
the wider search cannot model either, as a backlash's impacts, is no evidence for the richer
structure it finds there). A white residual, a peak inside the band, or a cut-off the user
named leave the search as it was.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from models.drivetrain.gp.evaluate import RecordingArrays
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.scales import STIFFNESS_DECADES, WIDE_DAMPING
from models.drivetrain.submodels import MULTI_MASS, Submodel, parameter_specs

LADDER = Submodel.FOUR_MASS  # its springs and dampers c1..c3, d1..d3 cover every ladder's


def search_again(search: Any, recording: Any, data: RecordingArrays) -> None:
    """After a fitted ``StructureSearch``'s first search: where :func:`wider` asks for it, run
    it again on ``recording`` at the wider cut-off (its checkpoints in ``widened-<cut>-<peak>``
    under the first's: its boxes depend on the peak) and keep the answer :func:`judged` keeps;
    ``widened_`` records both, ``n_evaluations_`` and ``timed_out_`` count both searches. A
    second search that fails leaves the first answer whole."""
    preset, directory = search._preset, search.checkpoint_dir
    again = wider(search, preset, data)
    if again is None:
        return
    first = dict(search.__dict__)  # the first search's answer, whole
    search._preset, search.widened_ = again  # (a progress callback reads it meanwhile)
    cut, peak = search._preset.identification.prefilter_hz, again[1]["periodic"]["frequency_hz"]
    search.checkpoint_dir = directory and directory / f"widened-{cut:g}-{peak:.6g}"
    try:
        search._search(recording, data)
        record = judged(search, data, again[1])
    except BaseException:  # the first answer stands, as it was
        search.__dict__.update(first)
        raise
    timed_out = first["timed_out_"] + search.timed_out_
    if not record["kept"]:
        search.__dict__.update(first)
    search._preset, search.checkpoint_dir, search.widened_ = preset, directory, record
    search.n_evaluations_ = record["first_evaluations"] + record["second_evaluations"]
    search.timed_out_ = timed_out


def wider(search: Any, preset: GPSettings, data: RecordingArrays) -> tuple[GPSettings, dict] | None:
    """For a fitted ``StructureSearch`` on ``data`` from ``preset``: the preset to search again
    with (its cut-off widened, no further widening; the preset's friction gain, the second
    search chooses its own) and the record of the first answer (the search's ``widened_``);
    None when its settings do not widen or its answer's residual shows nothing periodic above
    the prefilter, or cannot be simulated (a check that only adds a search must not end one)."""
    from models.drivetrain.fit_evidence import answer_residuals, wider_cutoff  # imports gp

    s = search.settings
    if not s.widen_prefilter:
        return None
    ident = s.identification
    try:
        res = answer_residuals(search.best_evaluation_, data, s)
    except Exception:
        return None
    cut = wider_cutoff(res, ident.prefilter_hz, data.dt)
    if cut is None or res.periodic is None:  # (the latter implied by the former: for mypy)
        return None
    best = search.best_evaluation_
    record = {
        "from_prefilter_hz": ident.prefilter_hz, "to_prefilter_hz": cut,
        "periodic": res.periodic.to_dict(), "first_structure": list(best.structure),
        "first_codes": list(best.codes), "first_rss": float(best.rss),
        "first_fitness": float(best.fitness), "first_evaluations": search.n_evaluations_,
    }  # fmt: skip
    wider = with_mode_at(preset, res.periodic.frequency_hz)
    record |= {"from_stiffness_max": _top(preset, "c1"), "to_stiffness_max": _top(wider, "c1")}
    return replace(wider, widen_prefilter=False,
                   identification=replace(preset.identification, prefilter_hz=cut)), record  # fmt: skip


def with_mode_at(preset: GPSettings, peak_hz: float) -> GPSettings:
    """``preset`` whose spring and damper boxes (``c1..c3``, ``d1..d3``) also hold the scales'
    boxes (``Scales.nominals``) around a mode at ``peak_hz``: springs ``c / 100 .. 10 c`` with
    ``c = (2 pi f)^2 J / 4`` between two halves of the nominal inertia ``J`` (the most any
    split needs), dampers ``d / 30 .. 10 d`` around a damping ratio of 0.05 there
    (``d = 0.1 sqrt(c J / 4)``). Each box becomes the union of the two, also around a value
    the user typed (its box 50..200 %, the ``narrow`` boxes' too: the peak is the data's
    evidence against it; a cut-off named keeps every box, as it turns the widening off); the
    nominals stay, a typed one every ladder's (a ladder's own nominal, ``three_mass.c1``,
    yields to it as before)."""
    nominals, bounds = dict(preset.nominals), dict(preset.bounds)
    masses = {s.name: s.nominal for s in parameter_specs(Submodel.TWO_MASS, nominals, bounds)}
    J = masses["J1"] + masses["J2"]
    c = (2 * math.pi * peak_hz) ** 2 * J / 4
    d = 0.1 * math.sqrt(c * J / 4)
    boxes = {"c": (c / STIFFNESS_DECADES[0], c * STIFFNESS_DECADES[1]),
             "d": (d / WIDE_DAMPING[0], d * WIDE_DAMPING[1])}  # fmt: skip
    for spec in _shared_specs(nominals, bounds):
        if spec.name[0] in boxes:
            lo, hi = boxes[spec.name[0]]
            if spec.name not in bounds:  # a value the user typed (or the narrow boxes'):
                for kind in MULTI_MASS:  # it stays every ladder's nominal once bounded
                    nominals.pop(f"{kind.value}.{spec.name}", None)
            bounds[spec.name] = (min(spec.lower, lo), max(spec.upper, hi))
    return replace(preset, nominals=nominals, bounds=bounds)  # type: ignore[arg-type]


def _shared_specs(nominals: dict, bounds: dict) -> tuple:
    """The ladder's parameter specs from the plain keys alone (``c1``, not ``three_mass.c1``):
    the boxes every ladder shares."""
    plain = [{k: v for k, v in keyed.items() if "." not in k} for keyed in (nominals, bounds)]
    return parameter_specs(LADDER, *plain)


def _top(preset: GPSettings, name: str) -> float:
    """The upper bound of the generic parameter ``name`` (``c1``) under ``preset``."""
    specs = _shared_specs(dict(preset.nominals), dict(preset.bounds))
    return next(s.upper for s in specs if s.name == name)


def judged(search: Any, data: RecordingArrays, record: dict) -> dict:
    """``record`` (:func:`wider`'s) with the second search's answer (``second_structure``,
    ``second_codes``, ``second_rss``, its residual's ``second_periodic``, its
    ``second_evaluations``) and ``kept``: whether it stands, that is whether its residual
    passes Fisher's periodic test (or is an exact fit): the component the first answer left is
    explained. A residual that cannot be simulated explains nothing: the first answer stands."""
    from models.drivetrain.fit_evidence import answer_residuals  # imports gp

    try:
        res = answer_residuals(search.best_evaluation_, data, search.settings)
        q, kept = res.periodic, bool(res.exact_fit or res.periodic is None or res.periodic.passed)
    except Exception:
        q, kept = None, False
    best = search.best_evaluation_
    return record | {
        "kept": kept,
        "second_structure": list(best.structure), "second_codes": list(best.codes),
        "second_rss": float(best.rss), "second_periodic": q.to_dict() if q else None,
        "second_evaluations": search.n_evaluations_,
    }  # fmt: skip

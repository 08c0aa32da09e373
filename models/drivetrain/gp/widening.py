"""The search once more at a wider prefilter (``GPSettings.widen_prefilter``; docs/methods.md
§2.4, "The prefilter widened").

The search fits the prefiltered output error (25 Hz by default), so a part acting above the
cut-off (a mode at 52 Hz, a current loop's corner) is invisible to its fitness, and a
structure without it is the fittest. The raw residual still carries it: where the answer's
residual fails Fisher's periodic test (``models.drivetrain.periodic``, at the level of the
residual tests) with its peak above the cut-off, the search runs again at the cut-off that
shows the peak (``fit_evidence.wider_cutoff``: twice the peak, or no prefilter above a
quarter of the sampling rate), once. Its answer stands where it explains what the first left:
its own residual passes Fisher's test (:func:`judged`); else the first answer stands (a peak
the wider search cannot model either, as a backlash's impacts, is no evidence for the richer
structure it finds there). A white residual, a peak inside the band, or a cut-off the user
named leave the search as it was.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from models.drivetrain.gp.evaluate import RecordingArrays
from models.drivetrain.gp.settings import GPSettings


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
    return replace(preset, widen_prefilter=False,
                   identification=replace(preset.identification, prefilter_hz=cut)), record  # fmt: skip


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

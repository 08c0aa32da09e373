"""The evidence for a fitted ``StructureSearch``'s answer (docs/methods.md §2.9): its best
structure's intervals and residual tests, and the rival table of its one-step neighbours,
reusing the fits the search already made (``models.drivetrain.structure_fit`` does the
identifying and the evidence of one structure)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from models.drivetrain.evidence import Evidence
from models.drivetrain.gp.dispatch import MapBatches
from models.drivetrain.gp.evaluate import Evaluation
from models.drivetrain.gp.recording import RecordingFile, as_arrays
from models.drivetrain.structure_fit import identify_rivals, rival_specs, structure_evidence
from models.drivetrain.submodels import parse_structure


def search_evidence(
    search: Any, recording: Any, map_batches: MapBatches | None = None, n_batches: int = 2,
    rivals: bool = True,
) -> Evidence:  # fmt: skip
    """The evidence for a fitted ``StructureSearch``'s best structure (``rivals=False``: no
    rival table). A neighbour the search refined (its local search after the last generation
    evaluates them) keeps that fit; one it only screened starts from the screened values; the
    others from the inherited ones (``rival_specs``)."""
    data = as_arrays(recording)
    if not rivals:
        return structure_evidence(search.best_structure_, search.best_parameters_, data,
                                  search.settings, n_sub=_n_sub(search))  # fmt: skip
    done: dict[tuple[str, ...], Evaluation] = {}
    starts: dict[tuple[str, ...], dict[str, float]] = {}
    for ev in _evaluations(search):
        if ev.refined and (ev.structure not in done or ev.fitness > done[ev.structure].fitness):
            done[ev.structure] = ev
        starts.setdefault(ev.structure, dict(ev.parameters))
    specs = rival_specs(search.best_structure_, search.best_parameters_, search.settings, starts)
    relation = {sp.structure: rel for sp, rel in specs}
    todo = [(sp, rel) for sp, rel in specs if sp.structure not in done]
    stored = recording if isinstance(recording, RecordingFile) else None
    found = dict((ev.structure, ev) for ev, _ in identify_rivals(
        todo, data, search.settings, search.seed, map_batches, n_batches, stored))  # fmt: skip
    found |= {k: v for k, v in done.items() if k in relation}
    return structure_evidence(search.best_structure_, search.best_parameters_, data,
                              search.settings, [(found[k], rel) for k, rel in relation.items()],
                              n_sub=_n_sub(search))  # fmt: skip


def _n_sub(search: Any) -> int | None:
    """The substeps of a fitted search's best evaluation (None when it does not say)."""
    best = getattr(search, "best_evaluation_", None)
    return best.n_sub if isinstance(best, Evaluation) else None


def _evaluations(search: Any) -> list[Evaluation]:
    """Every evaluation a fitted search holds: its structure cache (the generations and the
    local search), else the refined rows of ``population_history_``."""
    cache = getattr(search, "_cache", None)
    if isinstance(cache, dict) and cache:
        return [ev for ev in cache.values() if isinstance(ev, Evaluation)]
    rows = getattr(search, "population_history_", pd.DataFrame())
    out = []
    for row in rows.to_dict("records") if len(rows) else []:
        kinds = parse_structure(str(row["names"]).split(","))
        out.append(Evaluation(
            structure=tuple(k.value for k in kinds), codes=tuple(k.code for k in kinds),
            parameters=dict(row["parameters"]), rss=float(row["rss"]), rss_train=float(row["rss"]),
            fitness=float(row["fitness"]), n_params=int(row["n_params"]), nfev=0, wall_s=0.0,
            timed_out=False, refined=bool(row.get("refined")),
        ))  # fmt: skip
    return out

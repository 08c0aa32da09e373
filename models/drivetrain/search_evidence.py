"""The evidence for a fitted ``StructureSearch``'s answer (docs/methods.md §2.9): its best
structure's intervals and residual tests, and the rival table of its one-step neighbours,
reusing the fits the search already made (``models.drivetrain.structure_fit`` does the
identifying and the evidence of one structure). A search that chose its answer by the data's
evidence (``GPSettings.final_alpha``) shows the rival table by that same rule on its fitness
RSS (:func:`search_rival_table`), so the table's preferred structure and the answer agree
on the same fits.

A search whose final stage chose the friction gain (``gp.final_gain``) carries the answer's
gain in ``search.settings``: the intervals are those at that gain, the rivals the search never refined are fitted at it, and the
search-rule table takes each fit's own RSS (the fitness's floor where it lies below, as the
rule does: ``gp.selection.fitness_rss``) and parameter count (``d + 1`` where the gain was
estimated). The estimated gain is one more column of the covariance
(``structure_evidence(gain_estimated=True)``), so the intervals carry its uncertainty and
list it as ``f_tanh``. The velocity error's table (its BIC note) simulates every rival at the answer's
gain, also one the stage fitted at another: that note is then only approximate."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from models.drivetrain.evidence import (
    UNDERFIT,
    Evidence,
    Rival,
    RivalTable,
    f_test,
    information,
)
from models.drivetrain.fit_evidence import time_limit_note
from models.drivetrain.gp import final_gain
from models.drivetrain.gp.dispatch import MapBatches
from models.drivetrain.gp.evaluate import Evaluation, stopped
from models.drivetrain.gp.recording import RecordingFile, as_arrays
from models.drivetrain.gp.selection import fitness_rss
from models.drivetrain.gp.signals import split_index
from models.drivetrain.structure_fit import (
    fit_settings,
    identify_rivals,
    rival_specs,
    structure_evidence,
)
from models.drivetrain.submodels import parse_structure


def search_evidence(
    search: Any, recording: Any, map_batches: MapBatches | None = None, n_batches: int = 2,
    rivals: bool = True,
) -> Evidence:  # fmt: skip
    """The evidence for a fitted ``StructureSearch``'s best structure (``rivals=False``: no
    rival table), with a note where identifications stopped at their time limit
    (``fit_evidence.time_limit_note``). A neighbour the search refined (its local search after the last generation
    evaluates them) keeps that fit; one it only screened starts from the screened values; the
    others from the inherited ones (``rival_specs``)."""
    data = as_arrays(recording)
    ident = search.settings.identification
    limit = functools.partial(time_limit_note, timed_out=getattr(search, "timed_out_", []),
                              limit_s=ident.time_limit_s, work_limit=ident.work_limit)  # fmt: skip
    if not rivals:
        return limit(structure_evidence(search.best_structure_, search.best_parameters_, data,
                                        search.settings, n_sub=_n_sub(search),
                                        gain_estimated=_gain_estimated(search)))  # fmt: skip
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
    rivals_stopped = stopped(found.values())
    found |= {k: v for k, v in done.items() if k in relation}
    rows = [(found[k], rel) for k, rel in relation.items()]
    evidence = structure_evidence(search.best_structure_, search.best_parameters_, data,
                                  search.settings, rows, n_sub=_n_sub(search),
                                  gain_estimated=_gain_estimated(search))  # fmt: skip
    evidence = limit(_by_the_search_rule(search, evidence, rows, data.n))
    theirs = fit_settings(search.settings).identification
    return time_limit_note(evidence, rivals_stopped, theirs.time_limit_s, "the rivals' fits: ",
                           theirs.work_limit)  # fmt: skip


def _by_the_search_rule(
    search: Any, evidence: Evidence, rows: list[tuple[Evaluation, str]], n_data: int
) -> Evidence:
    """``evidence`` with the rival table judged by the rule the search chose its answer by
    (``GPSettings.final_alpha``, ``gp.selection``) on the search's fitness RSS, when it chose
    so (else as it is): the table and the answer then agree on the same fits. The velocity
    error's BIC verdict stays a note when it differs."""
    chosen = getattr(search, "selection_", None) or {}
    if not chosen.get("alpha") or evidence.rivals is None:
        return evidence
    s = search.settings
    n_fit = split_index(n_data, s.test_fraction)
    n, part = ((n_data - n_fit, "held-out tail") if n_fit < n_data
               else (n_data, "whole record"))  # fmt: skip
    rss = functools.partial(fitness_rss, k_p=s.k_p)  # as the search's rule: the floor counts
    best = (tuple(search.best_codes_), tuple(search.best_structure_),
            float(rss(search.best_evaluation_)), int(search.best_evaluation_.n_params))  # fmt: skip
    rivals = [(ev.codes, ev.structure, rss(ev), ev.n_params, rel) for ev, rel in rows]
    table = search_rival_table(best, rivals, n, chosen["n_eff"], alpha=chosen["alpha"],
                               m=int(chosen.get("m", 0)), part=part)  # fmt: skip
    notes = list(evidence.notes)
    raw = evidence.rivals
    if raw.preferred != table.preferred:
        pref = ",".join(map(str, raw.preferred))
        notes.append(f"on the raw velocity error the BIC rule ({raw.rule}) would prefer "
                     f"{{{pref}}}; the search chose by its own rule (the table)")  # fmt: skip
    return replace(evidence, rivals=table, notes=tuple(notes))


def _n_sub(search: Any) -> int | None:
    """The substeps of a fitted search's best evaluation (None when it does not say)."""
    best = getattr(search, "best_evaluation_", None)
    return best.n_sub if isinstance(best, Evaluation) else None


def _gain_estimated(search: Any) -> bool:
    """Whether the search's final stage chose its answer's friction gain from the data."""
    best = getattr(search, "best_evaluation_", None)
    return isinstance(best, Evaluation) and final_gain.estimated(best)


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


def search_rival_table(
    best: tuple[tuple[int, ...], tuple[str, ...], float, int],
    rivals: Sequence[tuple[tuple[int, ...], tuple[str, ...], float, int, str]],
    n: int,
    n_eff: float,
    *,
    alpha: float,
    m: int,
    part: str = "whole record",
) -> RivalTable:
    """The rival table by the search's rule (module docstring): rows as :func:`rival_table`'s,
    but the RSS is the search's fitness RSS (the prefiltered output error on the fitness
    part) counted as ``n_eff`` effective samples (``gp.selection``: the prefilter's and the
    residual's count); preferred: the structure, unless richer rivals fit significantly better
    (F-test ``p < alpha / m``, ``m`` the richer candidates the search tested, at least the
    table's), then the one with the fewest parameters (then the lowest RSS)."""
    m_eff = float(min(max(n_eff, 1.0), n))
    codes, names, rss, d = best
    aic, bic = information(rss, m_eff, d)
    rows = [Rival(tuple(codes), tuple(names), "best", float(rss), int(d), aic, bic)]
    for r_codes, r_names, r_rss, r_d, relation in rivals:
        pair = (r_rss, r_d, rss, d) if relation == "simpler" else (rss, d, r_rss, r_d)
        f, p = f_test(*pair, m_eff)
        r_aic, r_bic = (information(r_rss, m_eff, r_d) if math.isfinite(r_rss)
                        else (math.inf, math.inf))  # fmt: skip
        note = UNDERFIT if relation == "richer" and not r_rss <= rss * (1.0 + 1e-9) else ""
        rows.append(Rival(tuple(r_codes), tuple(r_names), relation, float(r_rss), int(r_d),
                          r_aic, r_bic, f, p, note))  # fmt: skip
    richer = [r for r in rows if r.relation == "richer" and r.n_params > d]
    level = alpha / max(m, len(richer), 1)
    hits = [r for r in richer if r.p_value < level]
    chosen = min(hits, key=lambda r: (r.n_params, r.rss, r.structure)) if hits else rows[0]
    rule = (f"the search's rule on its fitness RSS (prefiltered, {part}: {n} samples, "
            f"{m_eff:.4g} effective): the structure, unless a richer rival fits significantly "
            f"better (F-test p < {alpha:g}/{max(m, len(richer), 1)} = {level:.3g})")  # fmt: skip
    return RivalTable(tuple(rows), int(n), part, chosen.codes, rule, level)

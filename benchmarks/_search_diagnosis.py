"""Why a search missed a known structure (issue 26's recovery benchmark, ``drive_recovery
search``; a benchmark helper, not product code): how the structure it found relates to the truth, and what the search knew of the
truth (whether it was identified, refined, and how fit).

``relation(found, truth)``: ``same``; ``richer`` (the found structure holds every submodel of
the truth and at least as many inertias, and more of something); ``simpler`` (the converse);
``other`` (neither contains the other).

``truth_in_search(search, truth)``: the search's own evaluation of the true structure, if it
identified it (generations or the local search at the end), else None.

``search_facts(search, machine)``: the truth's fit, the evidence's numbers and the machine's
upper-band dynamics (``dynamics_line`` prints them) for a row.

``show_search(row, load)``: one machine's line, with ``gain_line`` (the answer's friction gain).

``miss_kind(row)``: why a search answered another structure (the summary's failure kinds);
``search_notes(rows)``: the summary's lines on widened searches and time-limit stops.

``evidence_line(selection)``: the search's choice by the data's evidence (its
``selection_``) as a second line (starting with a newline), or "" when it chose by the
fitness alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from models.drivetrain.gp.evaluate import Evaluation
from models.drivetrain.gp.operators import nests
from models.drivetrain.submodels import canonical


def relation(found: Iterable[str], truth: Iterable[str]) -> str:
    """``same``, ``richer``, ``simpler`` or ``other`` (module docstring; ``operators.nests``,
    the final stage's own containment)."""
    f, t = tuple(found), tuple(truth)
    if set(canonical(f)) == set(canonical(t)):
        return "same"
    return "richer" if nests(f, t) else "simpler" if nests(t, f) else "other"


def truth_in_search(search: Any, truth: Iterable[str]) -> Evaluation | None:
    """The search's evaluation of ``truth`` (its structure cache), or None if never tried."""
    names = tuple(k.value for k in canonical(truth))
    for ev in getattr(search, "_cache", {}).values():
        if tuple(ev.structure) == names:
            return ev
    return None


def search_facts(search: Any, machine: Any) -> dict:
    """A row's ``truth_in_search`` (the search's fit of the machine's structure: fitness, RSS,
    refined, parameters; None if never tried), ``selection`` (the evidence's count, ``m``,
    level, its moves and the richer candidates' short fits, ``screened``), ``final`` (the final
    stage's fits: round, structure, RSS, ``n_params``, wall, gain estimated, ``chosen``; the
    data the rule that skips hopeless refits, ``finalists.P_REFIT``, was checked on) and ``dynamics`` (``_drive_machines.dynamics``:
    modes, lag corner, dead time)."""
    from benchmarks._drive_machines import dynamics

    t = truth_in_search(search, machine.structure)
    sel = getattr(search, "selection_", None) or {}
    final = getattr(search, "final_", None)
    stage = ([] if final is None or not len(final) else  # the final stage's fits, compact
             final[["round", "names", "rss", "n_params", "wall_s", "gain_estimated",
                    "chosen"]]
             .to_dict("records"))  # fmt: skip
    return {"truth_in_search": t and {"fitness": t.fitness, "rss": t.rss, "refined": t.refined,
                                      "n_params": t.n_params},
            "selection": {k: v for k, v in sel.items()
                          if k in ("n_eff", "m", "alpha", "moves", "screened")},
            "final": stage, "dynamics": dynamics(machine)}  # fmt: skip


def answer_facts(search: Any, rec: Any) -> dict:
    """A row's ``answer_parameters`` (the answer's, whatever its relation to the truth) and
    ``residuals_passed``: whether its residual tests pass (``fit_evidence.answer_residuals``,
    those the evidence reports; None for an exact fit)."""
    from models.drivetrain.fit_evidence import answer_residuals
    from models.drivetrain.gp.recording import as_arrays

    res = answer_residuals(search.best_evaluation_, as_arrays(rec), search.settings)
    return {"answer_parameters": dict(search.best_parameters_)} | residual_facts(res)


def residual_facts(res: Any) -> dict:
    """A row's ``residuals_passed`` and ``periodic`` (Fisher's test: peak and p; None without
    it) from a ``ResidualAnalysis``."""
    return {"residuals_passed": res.passed,
            "periodic": res.periodic.to_dict() if res.periodic is not None else None}  # fmt: skip


def residual_word(row: dict) -> str:
    """A row's ``residuals_passed`` in a word: pass, fail, "n/a, exact fit" (None: the tests
    stand aside), "" for anything else (a row without it, or hand-edited); with the periodic
    test's peak where the row has it (rows since session 24)."""
    passed, q = row.get("residuals_passed", "?"), row.get("periodic")
    if not (isinstance(passed, bool) or passed is None):
        return ""
    word = {True: "pass", False: "fail"}.get(passed, "n/a, exact fit")
    try:
        return word + (f" (periodic peak {float(q['frequency_hz']):.4g} Hz, p "
                       f"{float(q['p_value']):.2g})" if isinstance(q, dict) else "")  # fmt: skip
    except (KeyError, TypeError, ValueError):  # a hand-edited row: the word alone
        return word


def dynamics_line(d: dict | None) -> str:
    """The truth's modes, lag corner and dead time for a machine's line ("" if none)."""
    d = d if isinstance(d, dict) else {}  # a row without them, or hand-edited
    parts = ([f"modes {', '.join(f'{f:.3g}' for f in d['modes_hz'])} Hz"] if d.get("modes_hz")
             else []) + ([f"lag corner {d['lag_hz']:.3g} Hz"] if d.get("lag_hz") else []) + (
             [f"dead time {d['delay_ms']:.3g} ms"] if d.get("delay_ms") else [])  # fmt: skip
    return f"; truth's {', '.join(parts)}" if parts else ""


def evidence_line(selection: dict | None) -> str:
    """One line for a search's ``selection_`` (effective samples, richer candidates, moves)."""
    sel = selection or {}
    if not sel.get("alpha"):
        return ""
    moves = "; ".join(f"{mv['before']} -> {mv['after']} (p {mv['p_value']:.2g} < "
                      f"{mv['level']:.2g})" for mv in sel["moves"]) or "none"  # fmt: skip
    return (f"\n      evidence: {sel['n_eff']:.4g} effective samples, {sel['m']} richer "
            f"candidates, moves: {moves}")  # fmt: skip


def prefilter_line(widened: dict | None, hz: float) -> str:
    """The answer's prefilter cut-off ``hz``, and where the search widened it
    (``StructureSearch.widened_``) from what and why."""
    if not widened:
        return f"; prefilter {hz:g} Hz"
    q, to = widened["periodic"], widened["to_prefilter_hz"]
    kept = widened.get("kept", True)
    second = "" if kept else (f"; the answer at {to:g} Hz, {'+'.join(widened['second_structure'])}"
                              f", left one too: the first stands")  # fmt: skip
    return (f"; prefilter {widened['from_prefilter_hz']:g} -> {to:g} Hz (the first answer "
            f"{'+'.join(widened['first_structure'])} left a periodic peak at "
            f"{q['frequency_hz']:.4g} Hz, p {q['p_value']:.2g}{second}); answered at {hz:g} Hz")  # fmt: skip


def gain_line(gain: dict | None) -> str:
    """The answer's friction gain (``StructureSearch.friction_gain_``, with the machine's)."""
    if not gain:
        return ""
    how = "estimated" if gain.get("estimated") else "fixed"
    return (f"; gain {gain['f_tanh']:.4g} ({how}, preset {gain['preset_f_tanh']:.4g}, machine "
            f"{gain.get('machine_f_tanh', float('nan')):.4g})")  # fmt: skip


def show_search(r: dict, load: float) -> None:
    """One machine's line of ``drive_recovery search`` (``load``: the 1-minute load)."""
    t = r["truth_in_search"]
    inner = ("truth not tried" if t is None else f"truth in search fitness {t['fitness']:.4g} "
             f"RSS {t['rss']:.4g}{'' if t['refined'] else ' (screened only)'}")  # fmt: skip
    a = r.get("truth_alone")
    alone = (f", truth alone fitness {a['fitness']:.4g} RSS {a['rss']:.4g} d {a.get('d', '?')}"
             f" gain {a.get('f_tanh', float('nan')):.4g}" if a else "")  # fmt: skip
    par = (f", ident {r['ident']:.2g}, outside 95 % {','.join(r['outside']) or '-'}"
           if "ident" in r else "")  # fmt: skip
    word = residual_word(r)  # rows before session 23: no word
    par += f", residual tests {word}" if word else ""
    par += gain_line(r.get("gain")) + dynamics_line(r.get("dynamics")) + r.get("evidence", "")
    stops = r.get("timed_out")  # (rows before session 26: not recorded)
    n_stops = len(stops) if isinstance(stops, list) else 0  # (a hand-edited row: none)
    par += f"; {n_stops} identifications stopped at their time limit" if n_stops else ""
    print(f"  #{r['machine']:2d} {r['kind']}: found {r['found']} [{r['relation']}] fitness "
          f"{r['fitness']:.4g} RSS {r['rss']:.4g} d {r['d']}; {inner}{alone}{par} "
          f"({r['wall_s']:.0f} s, load {load:.1f})", flush=True)  # fmt: skip


def miss_kind(r: dict) -> str:
    """Why a search answered another structure than the truth (a failure kind of the summary).
    The truth's best known fit: its refined fit in the search or, with ``--diagnose``, its fit
    alone at the answer's settings (``truth_alone``), whichever has the lower RSS; none: the
    truth never tried or only screened. Then, with the row's ``selection`` (the search's
    effective count ``n_eff``, level ``alpha / m``), for a truth richer than the answer: a fit
    no better than the answer's stalled (the truth nests the answer); else the F-test of the
    nested pair on the fitness RSS: not significant, the truth is *not supported by the data*
    (its extra parts within the noise: the answer is right by the rule's own standard);
    significant, it was *missed by the rule* (found by the search) or *supported by the data*
    (fitted alone: the search's miss). An answer richer than the truth that fits significantly
    better means the truth's fit stalled. Otherwise (or not nested) eq. 19 decides: it
    preferred the answer (the search's fit) or would prefer either (the fit alone)."""
    rel, t, sel = r["relation"], r.get("truth_in_search"), r.get("selection")
    head = f"another structure ({rel})"
    sel = sel if isinstance(sel, dict) else {}  # a hand-edited or foreign row: the relation
    if t is not None and not isinstance(t, dict):
        return head
    refined = bool(t and t.get("refined"))
    searched, alone = _fit(t, "n_params") if refined else None, _fit(r.get("truth_alone"), "d")
    if not refined:
        head += f": the truth {'never tried' if t is None else 'only screened'}"
    judged = isinstance(sel.get("n_eff"), int | float) and sel.get("alpha")
    if not judged or (searched is None and alone is None):
        return head
    by_alone = alone is not None and (searched is None or alone["rss"] < searched["rss"])
    truth = alone if by_alone else searched
    assert truth is not None  # (for mypy: one of the two is there)
    if by_alone:
        head += "; alone" if not refined else ": the truth fitted better alone"
    if rel == "simpler" and not truth["rss"] < r["rss"]:  # (nan, inf: a failed fit)
        return f"{head}: the truth's fit stalled (no better than the answer)"
    _p, supported = nested_test(rel, r["rss"], r["d"], truth["rss"], truth["n_params"], sel)
    if rel == "simpler":  # nan (no degrees of freedom): not supported
        found = "supported by the data" if by_alone else "missed by the rule"
        return f"{head}: the truth {found if supported else 'not supported by the data'}"
    if rel == "richer" and not supported:
        return f"{head}: the truth's fit stalled (the answer significantly better)"
    f_t, f_a = truth["fitness"], r["fitness"]
    if not by_alone:
        return f"{head}: eq. 19 preferred it (truth fitness {f_t:.3g} < {f_a:.3g})"
    if f_t > f_a:
        return f"{head}: the truth fits better by eq. 19 ({f_t:.3g} > {f_a:.3g}: the search's miss)"
    return f"{head}: eq. 19 prefers the answer (truth fitness {f_t:.3g} <= {f_a:.3g})"


def search_notes(rows: list[dict]) -> None:
    """The summary's lines on the searches widened (``gp.widening``) and the identifications
    stopped at their time limit (load-dependent)."""
    widened = [r["machine"] for r in rows if r.get("widened")]
    print(f"searched again at a wider prefilter: {len(widened)} of {len(rows)} "
          f"(machines {', '.join(map(str, widened)) or '-'})")  # fmt: skip
    stopped = {r["machine"]: len(r["timed_out"]) for r in rows if r.get("timed_out")}
    print(f"identifications stopped at their time limit: {sum(stopped.values())} on "
          f"{len(stopped)} of {len(rows)} machines ({stopped or '-'})")  # fmt: skip


def _fit(a: object, d_key: str) -> dict | None:
    """A truth's fit in a row (``truth_in_search``, ``d_key`` ``n_params``; ``truth_alone``,
    ``d``) as ``{"rss", "n_params", "fitness"}``, or None: none made, or a hand-edited row
    whose numbers are missing or not numbers (an RSS may be inf or nan: a failed fit)."""
    if not isinstance(a, dict):
        return None
    rss, d, fitness = a.get("rss"), a.get(d_key), a.get("fitness")
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (rss, fitness))
    if not numbers or not isinstance(d, int) or isinstance(d, bool):
        return None
    return {"rss": float(rss), "n_params": d, "fitness": float(fitness)}  # type: ignore[arg-type]


def nested_test(
    relation: str, answer_rss: float, answer_d: int, truth_rss: float, truth_d: int, sel: dict
) -> tuple[float, bool | None]:
    """The search's rule on a missed truth and the answer (a nested pair: the answer
    ``simpler`` or ``richer`` than the truth): the F-test's ``p`` of the richer against the
    simpler (the search's effective count ``sel["n_eff"]``) and whether the data support the
    truth at the level ``alpha / m``: a richer truth fits significantly better, or a richer
    answer does not (a nan ``p``, no degrees of freedom, is not significant); ``(nan, None)``
    for a pair that is not nested."""
    from models.drivetrain.evidence import f_test

    level = float(sel["alpha"]) / max(int(sel.get("m") or 1), 1)
    if relation == "simpler":  # the truth richer
        p = f_test(answer_rss, answer_d, truth_rss, truth_d, sel["n_eff"])[1]
        return p, bool(p == p and p < level)
    if relation == "richer":  # the answer richer
        p = f_test(truth_rss, truth_d, answer_rss, answer_d, sel["n_eff"])[1]
        return p, not (p == p and p < level)
    return math.nan, None


#: what a row of ``drive_recovery search --rows FILE.jsonl`` depends on besides its machine
ROW_KEYS = ("seed", "noise_percent", "boxes", "search_gain", "continuation", "prefilter",
            "population", "generations", "widen")  # fmt: skip


def row_key(args: Any) -> dict:
    """The settings a resumable row was searched with (``ROW_KEYS`` of the command line)."""
    return {k: getattr(args, k) for k in ROW_KEYS}


def done_rows(path: str, args: Any) -> dict[int, dict]:
    """The rows of a ``.jsonl`` rows file searched with ``args``' settings, by machine (a row
    with other settings, or a line cut short by a killed run, is not reused)."""
    import json
    from pathlib import Path

    out: dict[int, dict] = {}
    if not path.endswith(".jsonl") or not Path(path).exists():
        return out
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("key") == row_key(args) and "machine" in row:
            out[int(row["machine"])] = row
    return out


def append_row(path: str, args: Any, row: dict) -> None:
    """Append one machine's row to a ``.jsonl`` rows file, with its settings (``row_key``)."""
    import json

    if path.endswith(".jsonl"):
        from pathlib import Path

        line = json.dumps(row | {"key": row_key(args)}, default=str) + "\n"
        old = Path(path).read_bytes() if Path(path).exists() else b""
        if old and not old.endswith(b"\n"):  # a line cut short by a killed run
            line = "\n" + line
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)

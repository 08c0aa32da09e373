"""The parameter figures of a recovery run's exact answers, recomputed with today's evidence
(issue 26; no search):

    python benchmarks/drive_recovery_recheck.py --rows FILE.jsonl

Reads the rows ``drive_recovery.py search --rows FILE.jsonl`` wrote, regenerates each
machine's recording from the settings the row was searched with (its ``key``: seed, noise,
boxes, prefilter), and for every exact answer recomputes ``interval_check`` at the answer's
parameters and friction gain (the gain one more parameter when the search estimated it; the
fit's substeps when the row has them, else the step-size rule's). Prints each answer's values
outside their marginal and simultaneous 95 % intervals, and the search's interval figures
(``covered``, ``covered_joint``, ``covered_params``), so a run's figures follow a change of the
evidence without searching again.

``--residuals``: also every answer's residual tests (``fit_evidence.answer_residuals``) and the
figures ``white_exact`` and ``flagged`` (``_recovery_checks.residual_figures``: does the
answer's own evidence flag a miss?). A row with the answer's parameters (since session 23) is
tested at them; an older one (only exact answers kept them) by the answer's structure fitted
alone (``StructureFit`` at the row's gain, as ``drive fit`` would: seconds to a minute each).

``--truth``: also, for each exact answer, whether a parameter miss is the search's or the
model's (:func:`truth_facts`: the truth's RSS on the recording and on the noise-free one, and
the fit started at the truth), and whether a profile-likelihood interval would hold each true
value its linearised interval misses (:func:`profile_facts`).

``--missed``: for each answer that is not the truth, whether the data at the settings the
answer was found with support the truth (:func:`missed_facts`: the truth's RSS and the fit
started at it, against the answer by the search's own F-test): "supported" makes the miss the
search's (it never reached the truth's fit), "not supported" the data's at that cut-off."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks._drive_machines import machine_recording, preset_settings, simulate_machine
from benchmarks._recovery_checks import (
    interval_check,
    interval_figures,
    residual_figures,
    truth_rss,
)
from benchmarks._report import Bench, add_arguments
from benchmarks._search_diagnosis import residual_facts, residual_word
from methods.errors import InputError
from models.drivetrain.gp.widening import with_mode_at

MAX_MACHINE = 1000  # machine numbers a rows file may name
PIN = 1e-9  # a parameter pinned for its profile: a box this narrow (relative) around it
CHI2_1_95 = 3.841458820694124  # chi-square(1)'s 95 % point (scipy.stats.chi2.ppf(0.95, 1))
#: what a hand-edited or foreign row raises (a field missing or of the wrong kind;
#: ArgumentTypeError: a key's prefilter that is not one)
ROW_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    InputError,
    argparse.ArgumentTypeError,
)


def search_rows(path: str, exact: bool = True) -> list[dict]:
    """The rows of a ``.jsonl`` rows file (lines cut short and rows without a settings ``key``
    or a machine number skipped), each machine once (its last row); ``exact``: only those of
    exact answers."""
    rows: dict[tuple, dict] = {}
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (isinstance(row, dict) and isinstance(row.get("key"), dict)
                and isinstance(row.get("machine"), int)
                and (row.get("relation") == "same" or not exact)):  # fmt: skip
            rows[(json.dumps(row["key"], sort_keys=True), row["machine"])] = row
    return list(rows.values())


def regenerated(row: dict) -> tuple:
    """The row's machine, its recording and the search's settings at the answer's gain (and,
    where the answer is the widened search's, its cut-off and spring boxes: ``gp.widening``;
    a row before 2026-12-07 names no ``kept`` and was kept, none before then widened springs)."""
    key, i = row["key"], row["machine"]
    if not i < MAX_MACHINE:  # (drawing them would take hours)
        raise ValueError(f"machine {i!r} is not a machine number (0..{MAX_MACHINE - 1})")
    m, rec = machine_recording(key["seed"], key["noise_percent"], i)
    gp = preset_settings(rec, key["boxes"] == "wide", key["prefilter"],
                         position=True, population=key["population"],
                         generations=key["generations"])  # fmt: skip
    widened = row.get("widened")
    if widened and widened.get("kept", True):
        if "to_stiffness_max" in widened:
            gp = with_mode_at(gp, float(widened["periodic"]["frequency_hz"]))
        ident = replace(gp.identification, prefilter_hz=float(widened["to_prefilter_hz"]))
        gp = replace(gp, identification=ident)
    return m, rec, replace(gp, f_tanh=float(row["gain"]["f_tanh"]))


def truth_facts(row: dict) -> dict:
    """For an exact answer: is a parameter miss the search's or the model's? ``truth_rss``:
    the identification's RSS at the true parameters in the answer's model on the recording
    (against the row's ``rss``); ``truth_rss_noise_free``: the same on the noise-free
    recording (the model's own error: 0 where the kit reproduces the machine);
    ``from_truth_rss``: the fit of the answer's structure started at the true parameters (at
    the answer's RSS: the answer is the least-squares optimum, not a stall)."""
    from models.drivetrain.gp.evaluate import IndividualSpec, identify
    from models.drivetrain.gp.recording import as_arrays

    m, rec, gp = regenerated(row)
    clean = simulate_machine(m)  # (the noise-free recording: add_noise's draw at 0 %)
    float(row["rss"])  # the answer's, compared with (a row without it is not tested)
    n_sub = int(row.get("n_sub") or 1)
    start = IndividualSpec(m.structure, tuple(sorted(m.params.items())))
    return {"truth_rss": truth_rss(m.structure, m.params, rec, gp, n_sub),
            "truth_rss_noise_free": truth_rss(m.structure, m.params, clean, gp, n_sub),
            "from_truth_rss": float(identify(start, as_arrays(rec), from_start(gp)).rss),
            "profile": profile_facts(row, m, rec, gp)}  # fmt: skip


def print_truth(row: dict) -> None:
    """``--truth``'s lines for a rechecked row (its fresh ``outside``); a row that cannot be
    tested (a field missing or of the wrong kind, an RSS of 0) is named, not fatal."""
    try:
        t = truth_facts(row)
    except (*ROW_ERRORS, ArithmeticError) as err:
        print(f"      truth not tested ({type(err).__name__}: {err})", flush=True)
        return
    print(f"      RSS: the answer {row['rss']:.6g}, the truth {t['truth_rss']:.6g}, fitted "
          f"from the truth {t['from_truth_rss']:.6g}; the truth on the noise-free recording "
          f"{t['truth_rss_noise_free']:.4g}", flush=True)  # fmt: skip
    if t["profile"]:
        words = "; ".join(f"{k} {'inside' if v['inside'] else 'outside'} (LR {v['lr']:.3g})"
                          for k, v in t["profile"].items())  # fmt: skip
        print(f"      the truth pinned, the rest refitted (profile likelihood, 95 %: LR <= "
              f"{CHI2_1_95:.3g}): {words}", flush=True)  # fmt: skip


def missed_facts(row: dict) -> dict:
    """For an answer that is not the truth: the truth's RSS at the row's settings (cut-off,
    boxes, gain) at the substeps the fit below ended with, or the step-size rule's at the
    truth where more (``n_sub``; at the rule's 2 on seed-1 #1 the gap law left 1.875 where
    the fit's 32 gave 1.261; at the fit's 1 on #3 the truth left 74.1, its fit 0.149), the
    fit of the true structure started at the truth (``drive fit``'s continuations,
    ``finalists.final_settings``; ``timed_out`` where its time limit stopped it; ``stalled``
    where it ended above the truth's own RSS) and, for a nested pair (the row's relation
    ``simpler`` or ``richer``), the F-test of the richer of the two against the simpler
    (``p``; the truth's RSS the lower of the two, both points of its model) at the search's
    level ``alpha / m`` (its effective sample count; the
    friction gain one more parameter of a structure with Coulomb or Stribeck friction where
    the search estimated it). ``supported``: a richer truth fits significantly better, or a
    richer answer does not (what it adds is within the noise); None for a pair that is not
    nested (``_search_diagnosis.nested_test``, which the search-time counterpart from the
    search's own fits, ``miss_kind``, applies too). A ``ValueError`` for a row without the
    search's level or sample count."""
    from benchmarks._search_diagnosis import nested_test
    from models.drivetrain.friction_gain import SMOOTHED
    from models.drivetrain.gp.evaluate import IndividualSpec, identify
    from models.drivetrain.gp.finalists import final_settings
    from models.drivetrain.gp.recording import as_arrays
    from models.drivetrain.kit import assemble
    from models.drivetrain.substeps import substeps

    sel = row.get("selection") or {}
    if not (sel.get("alpha") and sel.get("n_eff")):
        raise ValueError("the row names no level and effective sample count of the search")
    level = float(sel["alpha"]) / max(int(sel.get("m") or 1), 1)
    m, rec, gp = regenerated(row)
    answer_rss, answer_d = float(row["rss"]), int(row["d"])
    gain = int(bool((row.get("gain") or {}).get("estimated") and SMOOTHED & set(m.structure)))
    start = IndividualSpec(m.structure, tuple(sorted(m.params.items())), refine=True)
    data = as_arrays(rec)
    fit = identify(start, data, final_settings(gp))
    rule = substeps(assemble(m.structure, **gp.kit_options()), data.dt, 1, m.params)
    n_sub = max(int(fit.n_sub), rule)  # (the fit's count may not simulate the truth stably)
    truth = truth_rss(m.structure, m.params, rec, gp, n_sub)
    d = fit.n_params + gain
    best = min(float(fit.rss), truth)
    p, supported = nested_test(str(row.get("relation")), answer_rss, answer_d, best, d, sel)
    if p != p and supported is not None:
        raise ValueError(f"no F-test: d {d} against {answer_d}, {sel['n_eff']} effective samples")
    return {"truth_rss": truth, "n_sub": n_sub, "from_truth_rss": float(fit.rss),
            "stalled": bool(fit.rss > truth * (1 + 1e-9)), "d": d, "p": float(p),
            "level": level, "supported": supported, "timed_out": bool(fit.timed_out),
            "seconds": float(fit.wall_s)}  # fmt: skip


def print_missed(row: dict) -> None:
    """``--missed``'s line for a row whose answer is not the truth (named, not fatal, when it
    cannot be tested)."""
    try:
        t = missed_facts(row)
    except (*ROW_ERRORS, ArithmeticError) as err:
        print(f"      truth not tested ({type(err).__name__}: {err})", flush=True)
        return
    verdict = {True: "supported: the miss is the search's", None: "not nested: RSS only",
               False: "not supported by the data at these settings"}[t["supported"]]  # fmt: skip
    stopped = " (stopped at its time limit)" if t["timed_out"] else ""
    stopped += " (a stall: above the truth's own RSS, which the test uses)" if t["stalled"] else ""
    print(f"      the truth at the answer's settings and {t['n_sub']} substeps: RSS "
          f"{t['truth_rss']:.6g}, fitted from it {t['from_truth_rss']:.6g}{stopped} (d "
          f"{t['d']}, {t['seconds']:.0f} s) against "
          f"the answer's {float(row['rss']):.6g} (d {row['d']}): F-test p {t['p']:.3g} (the "
          f"richer against the simpler), level {t['level']:.3g}: {verdict}", flush=True)  # fmt: skip


def from_start(settings):
    """``settings`` whose identification is one full fit from the given start (no screening,
    no random start)."""
    return replace(settings, identification=replace(settings.identification, n_starts=1,
                                                    screen_nfev=0))  # fmt: skip


def profile_facts(row: dict, m, rec, settings) -> dict:
    """For each parameter of an exact answer outside its marginal 95 % interval: the fit with
    that parameter pinned at its true value (``rss``; the others refitted from the answer) and
    the likelihood-ratio statistic ``lr = n_eff ln(rss / rss_answer)`` against chi-square(1)'s
    95 % point 3.84 (``inside``: the truth inside the profile-likelihood region, where the
    linearised interval missed it). ``n_eff``: the search's effective sample count (its
    ``selection``), else the prefilter's; the position error's share of the RSS is counted
    with the velocity's (an approximation)."""
    from models.drivetrain.gp.evaluate import IndividualSpec, identify
    from models.drivetrain.gp.recording import as_arrays
    from models.drivetrain.gp.selection import prefilter_count

    data = as_arrays(rec)
    n_eff = (row.get("selection") or {}).get("n_eff") or prefilter_count(
        data.n, settings.identification.prefilter_hz, data.dt)  # fmt: skip
    answer = dict(row["parameters"])
    out = {}
    for name in row.get("outside") or []:
        true = float(m.params[name])
        half = PIN * abs(true) or PIN
        pin = (true - half, true + half)
        keys = [name] + [f"{kind}.{name}" for kind in m.structure]
        bounds = dict(settings.bounds) | dict.fromkeys(keys, pin)
        pinned = from_start(replace(settings, bounds=bounds))
        at = IndividualSpec(m.structure, tuple(sorted((answer | {name: true}).items())))
        rss = float(identify(at, data, pinned).rss)
        lr = float(n_eff * math.log(rss / float(row["rss"])))
        out[name] = {"rss": rss, "lr": lr, "inside": lr <= CHI2_1_95}
    return out


def recheck(row: dict) -> dict:
    """``row`` with its interval figures recomputed on today's evidence."""
    m, rec, gp = regenerated(row)
    truth = m.f_tanh if row["gain"].get("estimated") else None
    return row | interval_check(m.structure, m.params, row["parameters"], rec, gp,
                                row.get("n_sub"), truth)  # fmt: skip


def residuals(row: dict) -> dict:
    """``row`` with its answer's ``residuals_passed`` (module docstring, ``--residuals``); a
    row that cannot be tested (a hand-edited or foreign one: a field missing or of the wrong
    kind) gets None and ``recheck_error`` naming why, so the other rows' fits are kept."""
    from models.drivetrain.fit_evidence import answer_residuals
    from models.drivetrain.gp.recording import as_arrays
    from models.drivetrain.structure_fit import StructureFit

    try:
        _m, rec, gp = regenerated(row)
        structure = tuple(str(row["found"]).split("+"))
        params = row.get("answer_parameters") or (row.get("parameters")
                                                  if row.get("relation") == "same" else None)  # fmt: skip
        if not params:
            fit = StructureFit(structure, settings=gp, rivals=False).fit(rec)
            return row | residual_facts(fit.evidence_.residuals)
        answer = SimpleNamespace(structure=structure, parameters=params, n_sub=row.get("n_sub"))
        return row | residual_facts(answer_residuals(answer, as_arrays(rec), gp))
    except ROW_ERRORS as err:
        return row | {"residuals_passed": None, "recheck_error": f"{type(err).__name__}: {err}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", required=True, help="a drive_recovery.py search rows file")
    parser.add_argument("--residuals", action="store_true",
                        help="also every answer's residual tests (module docstring)")  # fmt: skip
    parser.add_argument("--truth", action="store_true",
                        help="also each exact answer's truth_facts (module docstring)")  # fmt: skip
    parser.add_argument("--missed", action="store_true",
                        help="also each missed answer's missed_facts (module docstring)")  # fmt: skip
    add_arguments(parser, repeats=1)
    args = parser.parse_args(argv)
    if not Path(args.rows).is_file():
        parser.error(f"--rows {args.rows}: no such file")
    bench = Bench("drive_recovery-recheck", "drive-recovery", args.repeats, args.json)
    for _ in bench.runs():
        checked = []
        for row in sorted(search_rows(args.rows), key=lambda r: r["machine"]):
            try:
                r = recheck(row)
            except ROW_ERRORS as err:  # a hand-edited or foreign row: named, left out
                print(f"  # {row['machine']}: not rechecked ({type(err).__name__}: {err})")
                continue
            checked.append(r)
            print(f"  # {r['machine']} {r['kind']}: {len(r['param_errors'])} parameters; "
                  f"outside 95 % {', '.join(r['outside']) or '-'}; outside simultaneous "
                  f"{', '.join(r['outside_joint']) or '-'} (before: "
                  f"{', '.join(row.get('outside') or []) or '-'})", flush=True)  # fmt: skip
            if args.truth:
                print_truth(r)
        interval_figures(bench, checked)
        if args.residuals:
            told = []
            for row in sorted(search_rows(args.rows, exact=False), key=lambda r: r["machine"]):
                told.append(residuals(row))
                word = told[-1].get("recheck_error") or residual_word(told[-1])
                print(f"  # {row.get('machine')} {row.get('kind')} -> {row.get('found')} "
                      f"[{row.get('relation')}]: residual tests {word}", flush=True)  # fmt: skip
            residual_figures(bench, told)
        if args.missed:
            for row in sorted(search_rows(args.rows, exact=False), key=lambda r: r["machine"]):
                if row.get("relation") == "same":
                    continue
                print(f"  # {row.get('machine')} {row.get('kind')} -> {row.get('found')} "
                      f"[{row.get('relation')}]", flush=True)  # fmt: skip
                print_missed(row)
    bench.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

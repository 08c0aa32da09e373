"""What the drive study returns: a typed, frozen result with `to_dict()` (plain JSON types, the
keys of `--json` and of the Prefect result), `headline()` and `markdown()` (the run page)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from models.drivetrain.periodic import describe
from tracking.markdown import Link, cell, markdown_table, run_ref


@dataclass(frozen=True)
class DriveResult:
    """A drive structure search: the best structure, its parameters and fit."""

    best_structure: list[str]
    best_codes: list[int]
    parameters: dict[str, float]
    rss: float
    fitness: float
    generations: int
    run_id: str
    data_hash: str
    source: str
    resumed_from: int | None
    preset: str
    tracking: str
    history: tuple[dict[str, Any], ...] = ()
    model_uri: str = ""  # the registered MLflow model (models:/drive-<campaign>/<version>)
    #: open-loop validation on `validation_data`: output -> rmse, fit, r2, max_abs, n
    validation: dict[str, dict[str, float]] = field(default_factory=dict)
    validation_run_id: str = ""
    experiment_id: str = ""  # MLflow experiment of the runs (links to their pages)
    paper: bool = False  # the seed paper's search (`--paper`)
    #: every GP setting the search ran with (`GPSettings.to_dict()`)
    settings: dict[str, Any] = field(default_factory=dict)
    #: with the `data` preset: the recording's scales (`models.drivetrain.scales.Scales`)
    scales: dict[str, Any] | None = None
    #: structures the local search after the last generation moved to, in order ("2,5,6,7")
    polish_moves: list[str] = field(default_factory=list)
    #: the evidence for the answer (`models.drivetrain.evidence.Evidence.to_dict()`):
    #: parameter intervals, residual tests, rival table
    evidence: dict[str, Any] | None = None
    #: a fit of a named structure (`greylab drive fit`), not a search
    fit: bool = False
    #: how the search's final stage chose its answer (`StructureSearch.selection_`): the
    #: effective samples `n_eff`, the level `alpha` (0: by the fitness alone), the `m` richer
    #: structures tested, the `moves` ({before, after, p_value, level, m}), the richer
    #: candidates' short fits `screened` ({call, names, rss, n_params}, and the `answer`,
    #: `answer_rss`, the short fit's `p` against it, whether it was `refit` in full and the
    #: threshold `p_refit` applied, where it was one of more candidates than are refitted);
    #: None for a fit
    selection: dict[str, Any] | None = None
    #: the answer's friction smoothing gain (`friction_gain_record`): `mode` (auto, fixed,
    #: profile), `profiled`, the preset's `preset_f_tanh`, the model's `f_tanh`, whether the
    #: fit `estimated` it, and its `profile` ([f_tanh, rss] tried)
    friction_gain: dict[str, Any] | None = None
    #: the search ran twice (`StructureSearch.widened_`, `gp.widening`): the first answer's
    #: residual left a `periodic` component above its prefilter `from_prefilter_hz`, so it
    #: searched again at `to_prefilter_hz` (0: none); the first answer's `first_structure`,
    #: `first_codes`, `first_rss`, `first_fitness`, `first_evaluations`, the second's
    #: (`second_*`, its residual's `second_periodic`) and whether the second answer is the
    #: one reported (`kept`: its residual passes Fisher's test). None when it ran once
    widened: dict[str, Any] | None = None
    #: the structures whose identification stopped at its wall-clock time limit, one per stop
    #: (`StructureSearch.timed_out_`): the answer may then differ between runs of the same
    #: seed; the evidence's notes say so too
    timed_out: list[str] = field(default_factory=list)

    def _link(self, run_id: Any) -> Any:
        return run_ref(run_id, self.experiment_id)

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `greylab drive identify --json` (the per-generation history is in
        MLflow, `history.csv`)."""
        out = asdict(self)
        del out["history"], out["tracking"]
        return out

    def headline(self) -> str:
        """`{2,5,6,7} - fitness 0.93` (and the validation's position R^2 when validated)."""
        codes = ",".join(map(str, self.best_codes))
        line = f"{'fit ' if self.fit else ''}{{{codes}}} - fitness {self.fitness:.3g}"
        if "position" in self.validation:
            line += f", validation position R^2 {self.validation['position']['r2']:.4f}"
        return line

    def summary(self) -> str:
        """The answer at a glance for the run page: the outcome, the structure, fitness and
        RSS with a link labelled "run" to the MLflow run (the full result: `markdown()`)."""
        link = self._link(self.run_id)
        run = Link("run", link.url) if isinstance(link, Link) else (self.run_id[:8] or "-")
        return "\n".join([
            f"# drive: {cell(self.headline())}", "",
            f"{cell(', '.join(self.best_structure))}: fitness {cell(self.fitness)}, "
            f"RSS {cell(self.rss)}; MLflow {cell(run)}; details: the drive-result artifact",
        ])  # fmt: skip

    def markdown(self) -> str:
        """The best structure and its parameters for the Prefect run page."""
        rows = [[name, value] for name, value in self.parameters.items()]
        what = "Drive structure fit" if self.fit else "Drive structure search"
        return "\n".join([
            f"# {what}: {cell(', '.join(self.best_structure))} "
            f"(codes {cell(self.best_codes)})", "",
            f"fitness {cell(self.fitness)}, RSS {cell(self.rss)}, {self.generations} "
            f"generations, preset {cell(self.preset)}{self._paper_words()}", "",
            markdown_table(["parameter", "value"], rows), "",
            f"MLflow run {cell(self._link(self.run_id))}, data hash {cell(self.data_hash[:12])}, "
            f"registered model {cell(self.model_uri or '-')}", *self._validation_lines(),
            *evidence_lines(self.evidence), *selection_lines(self.selection),
            *(["", cell(gain_text(self.friction_gain))] if gain_text(self.friction_gain) else []),
            *(["", cell(widened_text(self.widened))] if self.widened else []),
        ])  # fmt: skip

    def _paper_words(self) -> str:
        """`, the paper's search (6 x 20, roulette)` when `paper`."""
        if not self.paper:
            return ""
        s = self.settings
        return (f", the paper's search ({s.get('population')} x {s.get('generations')}, "
                f"{s.get('selection')})")  # fmt: skip

    def _validation_lines(self) -> list[str]:
        if not self.validation:
            return []
        rows = [[out, m["rmse"], m["fit"], m["r2"], m["max_abs"]]
                for out, m in self.validation.items()]  # fmt: skip
        return ["", f"## Open-loop validation (MLflow run {cell(self._link(self.validation_run_id))})", "",
                markdown_table(["output", "RMSE", "fit %", "R^2", "max abs error"], rows)]  # fmt: skip


def joint_text(p: dict[str, Any]) -> str:
    """A parameter's simultaneous interval as ``lower .. upper`` ("-" when unbounded or from
    a result that predates it)."""
    lo, hi = p.get("joint_lower"), p.get("joint_upper")
    if not (isinstance(lo, float) and isinstance(hi, float)):
        return "-"
    return f"{lo:.4g} .. {hi:.4g}"


def periodic_text(residuals: dict[str, Any]) -> str:
    """``"; periodic component ..."`` for a result's ``evidence.residuals`` with Fisher's test
    (``models.drivetrain.periodic``), else empty (results stored before it)."""
    q = residuals.get("periodic")
    if not isinstance(q, dict):
        return ""
    return f"; periodic component {'pass' if q['passed'] else 'FAIL'} ({describe(q)})"


def evidence_lines(evidence: dict[str, Any] | None) -> list[str]:
    """The evidence of a drive result as Markdown: intervals, residual tests, rival table."""
    if not evidence:
        return []
    level = f"{100 * evidence['level']:g} %"
    params = [[name, p["value"], p["stderr"] if p["stderr"] is not None else math.inf,
               p["lower"] if p["lower"] is not None else math.nan,
               p["upper"] if p["upper"] is not None else math.nan, joint_text(p),
               p["note"] or "-"] for name, p in evidence["parameters"].items()]  # fmt: skip
    res = evidence["residuals"]
    verdict = ("exact fit (not tested)" if res["passed"] is None
               else "pass" if res["passed"] else "FAIL")  # fmt: skip
    lines = ["", "## Evidence", "",
             markdown_table(["parameter", "value", "std. error", f"{level} lower",
                             f"{level} upper", f"simultaneous {level}", "note"], params), "",
             f"Residual tests ({cell(100 * res['confidence'])} %, N = {res['n']}): {verdict}; "
             f"autocorrelation {'pass' if res['autocorrelation']['passed'] else 'FAIL'}, "
             f"cross-correlation with the input "
             f"{'pass' if res['cross_correlation']['passed'] else 'FAIL'}"
             f"{cell(periodic_text(res))}"]  # fmt: skip
    rivals = evidence.get("rivals")
    if rivals:
        rows = [[",".join(map(str, r["codes"])), r["relation"], r["rss"], r["n_params"],
                 r["aic"], r["bic"], r["p_value"] if r["p_value"] is not None else math.nan,
                 r["note"] or "-"] for r in rivals["rows"]]  # fmt: skip
        preferred = ",".join(map(str, rivals["preferred"]))
        lines += ["", f"Rivals on the {cell(rivals['part'])}: preferred {{{cell(preferred)}}} "
                  f"({cell(rivals['rule'])})", "",
                  markdown_table(["codes", "relation", "RSS", "parameters", "AIC", "BIC",
                                  "F-test p", "note"], rows)]  # fmt: skip
    return lines + [f"- {cell(n)}" for n in evidence.get("notes", [])]


def move_texts(selection: dict[str, Any] | None) -> list[str]:
    """Each move of the final stage's choice by the evidence, in words: `{2,5} -> {2,5,6}:
    F-test p 0.001 < 0.005 (0.01 over 2 richer structures)`."""
    if not selection:
        return []
    return [f"{{{m['before']}}} -> {{{m['after']}}}: F-test p {m['p_value']:.3g} < "
            f"{m['level']:.3g} ({selection['alpha']:g} over {m['m']} richer structures)"
            for m in selection.get("moves", [])]  # fmt: skip


def friction_gain_record(search: Any, preset_f_tanh: float) -> dict[str, Any]:
    """The answer's friction gain of a search (`StructureSearch.friction_gain_`, the final
    stage's profile) or of a fit (`StructureFit`: ``--friction-gain profile`` fits it), in one
    shape; ``preset_f_tanh``: the gain the settings gave before any profile."""
    record = getattr(search, "friction_gain_", None)
    if record is not None:
        return dict(record)
    profile = getattr(search, "gain_profile_", None)
    return {"mode": str(getattr(search, "friction_gain", "fixed")),
            "profiled": profile is not None, "preset_f_tanh": float(preset_f_tanh),
            "f_tanh": float(search.settings.f_tanh), "estimated": profile is not None,
            "profile": profile.to_dict()["profile"] if profile is not None else []}  # fmt: skip


def gain_text(record: dict[str, Any] | None) -> str:
    """`friction gain f_tanh 41.2 estimated by the fit (the preset's 100)`; empty when the
    answer kept the preset's gain."""
    if not record or not record.get("estimated"):
        return ""
    return (f"friction gain f_tanh {record['f_tanh']:.4g} estimated by the fit (the preset's "
            f"{record['preset_f_tanh']:.4g})")  # fmt: skip


def selection_lines(selection: dict[str, Any] | None) -> list[str]:
    """The final stage's choice by the evidence as Markdown (none when it did not choose)."""
    if not selection or not selection.get("alpha"):
        return []
    moves = move_texts(selection)
    verdict = (f"moved {len(moves)} time(s)" if moves
               else "no richer structure fits significantly better")  # fmt: skip
    return ["", f"Answer chosen by the evidence (level {cell(selection['alpha'])}, "
            f"{cell(round(selection['n_eff'], 1))} effective samples): {verdict}",
            *[f"- {cell(m)}" for m in moves]]  # fmt: skip


def widened_text(record: dict[str, Any] | None) -> str:
    """`searched again with the prefilter at 110 Hz and springs up to 1.4e+03 (from 5.47): the
    answer at 25 Hz, {1,3,8} (RSS ...), left a periodic component ...`; empty when the search
    ran once (a record before 2026-12-07 names no springs)."""
    if not record:
        return ""
    q, to = record["periodic"], record["to_prefilter_hz"]
    codes = ",".join(map(str, record["first_codes"]))
    springs = (
        f" and springs up to {record['to_stiffness_max']:.3g} (from "
        f"{record['from_stiffness_max']:.3g})"
        if record.get("to_stiffness_max", 0) > record.get("from_stiffness_max", 0)
        else ""
    )
    return (f"searched again {'without a prefilter' if not to else f'with the prefilter at {to:g} Hz'}"
            f"{springs}: the answer at {record['from_prefilter_hz']:g} Hz, {{{codes}}} (RSS "
            f"{record['first_rss']:.4g}), left a periodic component ({describe(q)}) above that "
            f"cut-off, where its fit did not look" + _second_words(record))  # fmt: skip


def _second_words(record: dict[str, Any]) -> str:
    """What became of the second search's answer (`gp.widening.judged`)."""
    if "kept" not in record:
        return ""
    codes = ",".join(map(str, record["second_codes"]))
    if record["kept"]:
        return f"; the answer there, {{{codes}}}, explains it (its residual shows none)"
    q = record.get("second_periodic")
    left = f" ({describe(q)})" if q else ""
    return (f"; the answer there, {{{codes}}}, left one too{left}, so the first answer "
            f"stands")  # fmt: skip

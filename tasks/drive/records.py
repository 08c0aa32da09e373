"""What a drive structure search records in MLflow (one run per search).

Params: the study settings (with `paper`: the values the paper's search used), the data
source, and `gp.<name>` / `gp.identification.<name>`: every GP setting the search runs with
(`models.drivetrain.gp.GPSettings`, after the preset, the paper switch and the study's values);
with the `data` preset `scales.<name>`, `scales.r2`, `scales.cutoff_hz`, `scales.prefilter_hz`,
`scales.visible_hz` (the recording's own
scales, `models.drivetrain.scales`).
Per generation (stepped metrics, live while the search runs): `best_fitness`, `best_rss` of
the best individual found so far; after the last generation, one step per move of the local
search (`polish_`), so the last step is the answer the run reports (its name, `result.json`).
At the end:
`param.<name>` for the identified parameters, `n_evaluations`, `n_timed_out` (identifications
stopped at their time limit), `best_structure` as tag and param,
artifacts `history.csv` (best structure per generation, codes and names), `convergence.csv`
(what the convergence figure draws: the generations, then the local search's moves),
`population.csv`
(every individual of every generation), `state_space.json`, `result.json`, `selection.json`
(how the final stage chose the answer, `StructureSearch.selection_`), `friction_gain.json` and
the params `friction_gain.f_tanh`, `friction_gain.estimated` (the answer's friction gain), and figures of
measured vs simulated output and of the fitness over generations (none for a fit of a named
structure, `greylab drive fit`). The evidence for the answer (`evidence`): standard errors,
residual tests, the rival table and the residual-correlation figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from products.register import register
from tracking.recorder import Recorder


def convergence(search: Any) -> pd.DataFrame:
    """The best fitness step by step: one row per generation (`history_`), then one per move
    of the local search after the last generation (`polish_`, `chosen`), numbered on from the
    generations; `overall_best_*` of the last row is the search's answer."""
    history = search.history_
    columns = ["generation", "best_fitness", "best_rss", "overall_best_fitness",
               "overall_best_rss", "overall_best_names", "step"]  # fmt: skip
    if not len(history):
        return pd.DataFrame(columns=columns)
    best_rss: list[float] = []  # of the best so far: the generation's when it is the best
    for r in history.itertuples():
        new_best = not best_rss or r.overall_best_fitness == r.best_fitness
        best_rss.append(float(r.best_rss) if new_best else best_rss[-1])
    rows: list[dict[str, Any]] = [{"generation": int(r.generation), "best_fitness": float(r.best_fitness),
             "best_rss": float(r.best_rss), "overall_best_fitness": float(r.overall_best_fitness),
             "overall_best_rss": b, "overall_best_names": str(r.overall_best_names),
             "step": "generation"} for r, b in zip(history.itertuples(), best_rss)]  # fmt: skip
    polish = getattr(search, "polish_", None)
    moves = polish[polish["chosen"]] if polish is not None and len(polish) else pd.DataFrame()
    last = rows[-1]["generation"]
    for k, move in enumerate(moves.itertuples(), 1):
        rows.append({"generation": last + k, "best_fitness": float(move.fitness),
                     "best_rss": float(move.rss), "overall_best_fitness": float(move.fitness),
                     "overall_best_rss": float(move.rss), "overall_best_names": str(move.names),
                     "step": "local search"})  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


class DriveRecorder(Recorder):
    study = "drive"
    run_name = "drive-search"

    def search_settings(self, settings: Any) -> None:
        """`gp.<name>` for every field of the search's `GPSettings`, `gp.identification.<name>`
        for its identification settings (logged before the search starts)."""
        values = settings.to_dict()
        identification = values.pop("identification")
        self.run.params({f"gp.{k}": v for k, v in values.items()}
                        | {f"gp.identification.{k}": v for k, v in identification.items()})  # fmt: skip

    def scales(self, scales: Any) -> None:
        """`scales.<name>` (total inertia, friction, offset from the rigid-body fit),
        `scales.r2` and `scales.cutoff_hz`: what the `data` preset centred the search on;
        `scales.prefilter_hz` and `scales.visible_hz`: the spectrum's suggested prefilter
        cut-off and the band it rests on (`--prefilter spectrum` runs with it)."""
        self.run.params({f"scales.{k}": f"{v:.6g}" for k, v in scales.values.items()}
                        | {"scales.r2": f"{scales.r2:.4f}",
                           "scales.cutoff_hz": f"{scales.cutoff_hz:.4g}",
                           "scales.prefilter_hz": f"{scales.prefilter_hz:.4g}",
                           "scales.visible_hz": f"{scales.visible_hz:.4g}"})  # fmt: skip

    def friction_gain(self, record: dict[str, Any]) -> None:
        """`friction_gain.f_tanh` (the answer's model's), `friction_gain.estimated` and
        `friction_gain.json` (`tasks.drive.result.friction_gain_record`, its profile too): the
        `gp.f_tanh` param is the preset's, logged before the search."""
        self.run.params({"friction_gain.f_tanh": f"{record['f_tanh']:.6g}",
                         "friction_gain.estimated": str(bool(record["estimated"]))})  # fmt: skip
        self.run.json(record, "friction_gain.json")

    def widened(self, record: dict[str, Any] | None) -> None:
        """A search run again at a wider prefilter (`gp.widening`): `widened.*` params (the
        cut-offs, both answers and which stands; the `gp.*` params are the first search's) and
        metrics (the periodic peak and its p, the springs' box tops before and after),
        `widened.json`. Nothing when it ran once."""
        if not record:
            return
        q = record["periodic"]
        self.run.params({"widened.from_prefilter_hz": f"{record['from_prefilter_hz']:g}",
                         "widened.to_prefilter_hz": f"{record['to_prefilter_hz']:g}",
                         "widened.first_codes": ",".join(map(str, record["first_codes"])),
                         "widened.second_codes": ",".join(map(str, record["second_codes"])),
                         "widened.kept": str(bool(record["kept"]))})  # fmt: skip
        tops = {f"widened.{k}": float(record[k])
                for k in ("from_stiffness_max", "to_stiffness_max") if k in record}  # fmt: skip
        self.run.metrics({"widened.peak_hz": float(q["frequency_hz"]),
                          "widened.p_value": float(q["p_value"])} | tops)  # fmt: skip
        self.run.json(record, "widened.json")

    def generation(self, g: int, best: Any) -> None:
        self.run.metrics({"best_fitness": float(best.fitness), "best_rss": float(best.rss)}, step=g)

    def result(self, search: Any, recording: pd.DataFrame) -> None:
        run = self.run
        self._local_search_steps(search)
        structure = ",".join(search.best_structure_)
        run.params({"best_structure": structure,
                    "best_codes": ",".join(map(str, search.best_codes_))})  # fmt: skip
        run.tags({"greylab.best_structure": structure})
        # the checkpoint is the drive study's cache: say when generations came from it
        resumed = int(getattr(search, "resumed_from_", 0) or 0)
        self.cache_tags(
            {
                "greylab.cache": (
                    "miss"
                    if not resumed
                    else "hit"
                    if resumed >= search.settings.generations
                    else "partial"
                ),
                "greylab.cached_steps": f"generations 1-{resumed}" if resumed else "-",
            }
        )
        run.metrics(
            {
                "n_evaluations": float(search.n_evaluations_),
                "n_timed_out": float(len(search.timed_out_)),
            }
            | {f"param.{k}": float(v) for k, v in search.best_parameters_.items()},
        )
        run.table(search.history_, "history.csv")
        if len(search.history_):
            run.table(convergence(search), "convergence.csv")
        population = search.population_history_.assign(
            parameters=search.population_history_["parameters"].map(str)
        )
        run.table(population, "population.csv")
        run.table(search.polish_, "polish.csv")
        run.json(search.state_space_, "state_space.json")
        run.json(search.to_dict(), "result.json")
        if getattr(search, "selection_", None) is not None:
            run.json(search.selection_, "selection.json")
        self._figures(search, recording)

    def register_model(
        self, search: Any, recording: pd.DataFrame, campaign: str, *, units: str, source: str
    ) -> str:
        """The identified structure as the MLflow model `drive-<campaign>`
        (`models.drivetrain.product.DriveModel` with the recording's `units`, rotary or
        prismatic, and `source`); returns its `models:/` URI. Input example: the first 200
        samples of the recording."""
        from models.drivetrain.product import DriveModel
        from products.pyfunc import registered_name

        model = DriveModel.from_search(search, units=units, source=source)
        columns = [c for c in ("t_s", "torque_Nm", "velocity_rad_s", "position_rad")
                   if c in recording]  # fmt: skip
        structure = ",".join(search.best_structure_)
        registered = register(self,
            self.run, {"kind": "drive", "model": model.to_dict()},
            name=registered_name("drive", campaign), input_example=recording[columns].head(200),
            tags={"greylab.structure": structure,
                  "greylab.codes": ",".join(map(str, search.best_codes_))},
            description=f"drive train {{{structure}}} identified by the structure search "
            "(greylab drive identify): open-loop velocity and position for a torque record",
        )  # fmt: skip
        return registered["uri"]

    def _figures(self, search: Any, recording: pd.DataFrame) -> None:
        from models.drivetrain import plots

        time_s = recording["t_s"].to_numpy(float)
        measured = recording["velocity_rad_s"].to_numpy(float)
        title = f"best {search.best_codes_} = {', '.join(search.best_structure_)}"
        output, fitness = search.best_output_, search.best_fitness_
        # built when logged (after the answer in the command line): a failure to draw, e.g.
        # matplotlib's "failed to load glyph", is then a warning, not the command's failure
        self.run.figure(lambda: plots.plot_fit(time_s, measured, output, title=title),
                        "figures/fit.png")  # fmt: skip
        if len(search.history_):  # a fit of a named structure has no generations
            steps, n_generations = convergence(search), len(search.history_)

            def history() -> Any:
                figure = plots.plot_history(steps)
                if len(steps) > n_generations:  # mark where the local search starts
                    axis = figure.axes[0]
                    axis.axvline(n_generations - 0.5, color="0.6", lw=0.8)
                    axis.set_xlabel("generation, then the local search's moves")
                    axis.set_title(f"answer: fitness {fitness:.3g}", fontsize=9)
                return figure

            self.run.figure(history, "figures/convergence.png")

    def _local_search_steps(self, search: Any) -> None:
        """`best_fitness` / `best_rss` steps after the last generation, one per move of the
        local search, so that the metrics end at the answer (the last move is the best)."""
        steps = convergence(search)
        # a widened search's generations were logged after the first search's (flow.py)
        offset = len(search.history_) if getattr(search, "widened_", None) else 0
        for row in steps.iloc[len(search.history_) :].to_dict("records"):
            self.run.metrics({"best_fitness": float(row["overall_best_fitness"]),
                              "best_rss": float(row["overall_best_rss"])},
                             step=offset + int(row["generation"]))  # fmt: skip

    def evidence(self, evidence: Any, recording: pd.DataFrame) -> None:
        """The evidence for the answer (`models.drivetrain.evidence`): metrics
        `stderr.<name>`, `evidence.sigma`, `evidence.condition`, `evidence.residuals_passed`
        (1/0, absent for an exact fit), `evidence.rivals_agree`; params
        `evidence.preferred` (codes the rival rule prefers) and `evidence.identifiable`;
        artifacts `evidence.json`, `rivals.csv` and `figures/residuals.png`."""
        from models.drivetrain import plots

        run = self.run
        metrics = {f"stderr.{p.name}": p.stderr for p in evidence.parameters
                   if np.isfinite(p.stderr)}  # fmt: skip
        metrics |= {"evidence.sigma": float(evidence.sigma)}
        if np.isfinite(evidence.condition):
            metrics["evidence.condition"] = float(evidence.condition)
        if evidence.residuals.passed is not None:
            metrics["evidence.residuals_passed"] = float(evidence.residuals.passed)
        if evidence.residuals.periodic is not None:
            q = evidence.residuals.periodic
            metrics |= {"evidence.periodic_p": q.p_value, "evidence.periodic_hz": q.frequency_hz}
        params = {"evidence.identifiable": str(evidence.identifiable)}
        if evidence.rivals is not None:
            metrics["evidence.rivals_agree"] = float(evidence.rivals.agrees)
            params["evidence.preferred"] = ",".join(map(str, evidence.rivals.preferred))
            rows = [r.to_dict() | {"codes": ",".join(map(str, r.codes)),
                                   "structure": ",".join(r.structure)}
                    for r in evidence.rivals.rows]  # fmt: skip
            run.table(pd.DataFrame(rows), "rivals.csv")
        run.metrics(metrics)
        run.params(params)
        run.json(evidence.to_dict(), "evidence.json")
        codes = ",".join(map(str, evidence.codes))
        residuals = evidence.residuals
        run.figure(lambda: plots.plot_residual_correlations(
            residuals, title=f"residual analysis of {{{codes}}}"), "figures/residuals.png")  # fmt: skip

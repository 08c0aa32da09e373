"""Compare tracked runs of a study: a table read from MLflow and a comparison figure.

Runs are found by tags (`greylab.study`, `greylab.kind`), so any experiment can be compared.
Columns: identity (run, start, experiment), the study's headline columns first, then every
other parameter and metric, so nothing tracked is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tracking.mlflow_tracker import Tracker


@dataclass(frozen=True)
class CompareSpec:
    """How `greylab compare` lines up one study's runs (a row of the study registry,
    `flows/studies.py`).

    `kind`: the runs that are the units of comparison (`parent`: one per study invocation;
    `child`: one per model or system); `lead`: the columns shown first; `headline`: the metric
    of the figure's first panel (`log`: on a log scale when positive); `short`: the default
    columns of the table (they fit 80 characters); `reference`: a column drawn as a mark over
    the headline (the press test's threshold); `series`: metrics logged once per step (per
    test), old names included, that are not columns: their latest value is only the last
    step's (the run page charts them; the table has the run's summary, e.g. `min_alpha`), so
    runs recorded under an old name line up with new ones."""

    kind: str
    lead: tuple[str, ...]
    headline: str
    short: tuple[str, ...]
    log: bool = True
    reference: str | None = None
    series: tuple[str, ...] = ()


# the columns `greylab compare` shows by default: they fit an 80-column terminal


def choose_columns(frame: pd.DataFrame, wanted: list[str] | None, default: list[str]) -> list[str]:
    """The columns to show: ``wanted`` (names as in ``--json``; ``["all"]`` = every column)
    or the default ones present. An unknown name is an InputError listing the known ones."""
    if not wanted:
        return [c for c in default if c in frame.columns]
    if [w.lower() for w in wanted] == ["all"]:
        return list(frame.columns)
    unknown = [w for w in wanted if w not in frame.columns]
    if unknown:
        from methods.errors import InputError

        known = ", ".join(map(str, frame.columns))
        raise InputError(f"--columns: unknown column(s) {unknown}; known: {known[:1500]}")
    return wanted


def runs_table(
    study: str,
    spec: CompareSpec,
    *,
    experiment: str | None = None,
    last: int = 20,
    tracker: Tracker | None = None,
) -> pd.DataFrame:
    """The `last` newest runs of `study` (of `spec.kind`), one row each: identity, start, the
    study run they belong to (`study_run`: the parent's id for child runs), verdict, cache,
    data hash, commit, then every param and metric; the lead columns first."""
    tracker = tracker or Tracker()
    client = tracker.client
    if experiment:
        found = client.get_experiment_by_name(experiment)
        ids = [found.experiment_id] if found else []
    else:
        ids = [e.experiment_id for e in client.search_experiments()]
    if not ids:
        return pd.DataFrame()
    runs = client.search_runs(
        ids,
        filter_string=f"tags.`greylab.study` = '{study}' and tags.`greylab.kind` = '{spec.kind}'",
        order_by=["attributes.start_time DESC"],
        max_results=max(1, last),
    )
    rows = []
    for run in runs:
        tags = run.data.tags
        row: dict[str, Any] = {
            "run_id": run.info.run_id,
            "run_name": run.info.run_name,
            "start": pd.Timestamp(run.info.start_time, unit="ms"),
            "status": run.info.status,
            "study_run": tags.get("mlflow.parentRunId", run.info.run_id),
            "verdict": tags.get("greylab.verdict", ""),
            # hit/partial/miss: a comparison never mixes cached and recomputed runs unknowingly
            "cache": tags.get("greylab.cache", ""),
            "data_hash": tags.get("greylab.data_hash", "")[:12],
            "commit": tags.get("greylab.commit", "")[:12],
        }
        row |= dict(run.data.params)
        row |= {k: v for k, v in run.data.metrics.items() if k not in spec.series}
        rows.append(row)
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    lead = ["run_id", "start"] + [c for c in spec.lead if c in frame.columns]
    estimates = sorted(c for c in frame.columns if c.startswith(("param.", "stderr.")))
    rest = [c for c in frame.columns if c not in lead and c not in estimates]
    return frame[lead + estimates + rest]


def comparison_figure(spec: CompareSpec, frame: pd.DataFrame) -> Any:
    """Headline metric per run (log scale where useful) plus parameter estimates with
    standard errors where the study has them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    estimates = sorted(c.removeprefix("param.") for c in frame.columns if c.startswith("param."))
    ncols = 1 + len(estimates)
    fig, axes = plt.subplots(1, ncols, figsize=(4.5 * ncols, 3.8), squeeze=False)
    labels = [
        f"{r.get('model') or r.get('system') or r.get('run_name', '')}\n{str(r['run_id'])[:6]}"
        for r in frame.to_dict("records")
    ]
    x = np.arange(len(frame))
    ax = axes[0, 0]
    headline = frame[spec.headline] if spec.headline in frame else pd.Series(np.nan, frame.index)
    values = pd.to_numeric(headline, errors="coerce")
    ax.bar(x, values, color="tab:blue")
    if spec.log and np.nanmin(values.where(values > 0, np.nan)) > 0:
        ax.set_yscale("log")
    if spec.reference and spec.reference in frame:
        reference = pd.to_numeric(frame[spec.reference], errors="coerce")
        ax.plot(x, reference, "r_", markersize=20, label=spec.reference)
        ax.legend()
    ax.set_title(spec.headline)
    for i, name in enumerate(estimates, start=1):
        axis = axes[0, i]
        value = pd.to_numeric(frame[f"param.{name}"], errors="coerce")
        err = pd.to_numeric(frame.get(f"stderr.{name}", 0 * value), errors="coerce")
        axis.errorbar(x, value, yerr=err, fmt="o", capsize=4)
        axis.set_title(f"{name} ± s.e.")
    for axis in axes[0]:
        axis.set_xticks(x, labels, rotation=60, fontsize=7)
    fig.tight_layout()
    return fig


#: registry columns first; then every `validation.*` tag of the versions
MODEL_LEAD = ["name", "version", "study", "verdict", "structure", "data_hash", "created",
              "run_id"]  # fmt: skip


def models_table(
    studies: tuple[str, ...],
    study: str | None = None,
    *,
    last: int = 20,
    tracker: Tracker | None = None,
) -> pd.DataFrame:
    """Registered greylab model versions side by side (newest first, at most `last` per
    name): verdict (press) or structure (drive), data hash, the run that made them, and the
    newest validation (`validation.<output>.<metric>` tags, set by `greylab … validate`).
    `studies`: the studies that register models (their names prefix the registered names)."""
    if study is not None and study not in studies:
        from methods.errors import InputError

        listed = " and ".join(
            [", ".join(studies[:-1]), studies[-1]] if len(studies) > 1 else studies
        )
        raise InputError(f"--study {study[:40]!r}: registered models exist for {listed}")
    client = (tracker or Tracker()).client
    prefixes = (f"{study}-",) if study else tuple(f"{s}-" for s in studies)
    rows = []
    for registered in client.search_registered_models(max_results=1000):
        if not registered.name.startswith(prefixes):
            continue
        versions = client.search_model_versions(
            f"name = '{registered.name}'",
            max_results=max(1, last),
            order_by=["version_number DESC"],
        )
        for version in versions:
            tags = version.tags or {}
            if "greylab.study" not in tags:
                continue  # a model of the same name not registered by greylab
            row = {
                "name": version.name, "version": int(version.version),
                "study": tags["greylab.study"], "verdict": tags.get("greylab.verdict", ""),
                "structure": tags.get("greylab.structure", ""),
                "data_hash": tags.get("greylab.data_hash", "")[:12],
                "created": pd.Timestamp(version.creation_timestamp, unit="ms"),
                "run_id": version.run_id or "",
            }  # fmt: skip
            row |= {k: _number(v) for k, v in sorted(tags.items()) if k.startswith("validation.")}
            rows.append(row)
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values(["name", "version"], ascending=[True, False])


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text

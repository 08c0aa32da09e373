"""What a validation returns: the validated model, the data and the metrics per output as a
typed, frozen result with `to_dict()` (the keys of `greylab press|drive validate --json` and
`greylab validation run --json`), `headline()` (the flow run's and the MLflow run's name) and
`markdown()` / `summary()` (the run page: narrow, short links)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tracking.markdown import Link, cell, markdown_table, run_ref

#: the metrics shown per output on the run page (every metric is in the evaluation run)
SHOWN = (("rmse", "RMSE"), ("fit", "fit %"), ("r2", "R^2"), ("max_abs", "max |error|"))


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) and math.isfinite(value) else str(value)


@dataclass(frozen=True)
class ValidationResult:
    """One validation of a registered model (`products.validation.ValidationOutcome` as plain
    data): `metrics` per output (`rmse`, `fit`, `r2`, `max_abs`, `n`), the core's full result
    (`validation`), the evaluation run and the registered versions tagged with it."""

    model_uri: str
    kind: str
    data: str
    data_hash: str
    model_run_id: str
    metrics: dict[str, dict[str, float]]
    validation: dict[str, Any]
    run_id: str = ""
    versions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    experiment_id: str = field(default="", compare=False)  # links to the MLflow run page

    @classmethod
    def of(cls, outcome: Any, experiment_id: str = "") -> ValidationResult:
        """From a `products.validation.ValidationOutcome`."""
        return cls(
            model_uri=outcome.model_uri, kind=outcome.kind, data=outcome.data,
            data_hash=outcome.data_hash, model_run_id=outcome.model_run_id,
            metrics={k: dict(v) for k, v in outcome.metrics.items()},
            validation=dict(outcome.details), run_id=outcome.run_id,
            versions=tuple(outcome.versions), warnings=tuple(outcome.warnings),
            experiment_id=experiment_id,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `greylab … validate --json` (keys unchanged since the CLI had them)."""
        return {
            "model_uri": self.model_uri, "kind": self.kind, "data": self.data,
            "data_hash": self.data_hash, "model_run_id": self.model_run_id,
            "metrics": self.metrics, "validation": self.validation, "run_id": self.run_id,
            "versions": list(self.versions), "warnings": list(self.warnings),
        }  # fmt: skip

    @property
    def model(self) -> str:
        """`press-M3 v2` from `models:/press-M3/2`; `press-M3 v2 (champion)` from
        `models:/press-M3@champion` once the tagged versions say which version it was."""
        text = self.model_uri.removeprefix("models:/")
        name, sep, version = text.partition("/")
        if sep and version.isdigit():
            return f"{name} v{version}"
        name, sep, alias = text.partition("@")
        found = [v.partition("/")[2] for v in self.versions if v.partition("/")[0] == name]
        return f"{name} v{found[0]} ({alias})" if sep and len(found) == 1 else text

    def worst_r2(self) -> tuple[str, float] | None:
        """The output with the smallest R^2 and that R^2 (None without metrics)."""
        values = [(out, m["r2"]) for out, m in self.metrics.items() if "r2" in m]
        return min(values, key=lambda item: item[1]) if values else None

    def outside_band(self) -> float | None:
        """Press: the share of all measurements outside the 95 % prediction band."""
        share = self.validation.get("outside_band_all") if self.kind == "press" else None
        return float(share) if isinstance(share, int | float) else None

    def headline(self) -> str:
        """The outcome in one line: the model, its worst R^2, and for press the share of
        measurements outside the 95 % prediction band (5 % expected for a correct model)."""
        parts = []
        worst = self.worst_r2()
        if worst is not None:
            out, r2 = worst
            parts.append(f"R^2 {r2:.4g}" + (f" (lowest: {out})" if len(self.metrics) > 1 else ""))
        share = self.outside_band()
        if share is not None:
            parts.append(f"{share:.1%} outside the 95 % band")
        return f"validation: {self.model}: " + (", ".join(parts) or "no output validated")

    def _rows(self) -> list[list[Any]]:
        return [[out, *(m.get(key, float("nan")) for key, _ in SHOWN), int(m.get("n", 0))]
                for out, m in self.metrics.items()]  # fmt: skip

    def summary(self) -> str:
        """The answer at a glance (the `validation-summary` artifact): the headline, one
        narrow row per output, the warnings and a short link to the evaluation run."""
        columns = ["output", *(label for _, label in SHOWN), "n"]
        lines = [f"# {cell(self.headline())}", "", markdown_table(columns, self._rows()), ""]
        share = self.outside_band()
        if share is not None:
            lines += [f"{share:.1%} of the measurements outside the 95 % prediction band "
                      "(5 % expected for a correct model).", ""]  # fmt: skip
        lines += [f"**Warning:** {cell(w)}" for w in self.warnings]
        if self.run_id:
            link = run_ref(self.run_id, self.experiment_id)
            tagged = ", ".join(self.versions) or "no registered version"
            lines += ["", f"Evaluation run {cell(_labelled(link))}; tagged {cell(tagged)}"]
        return "\n".join(lines).rstrip() + "\n"

    def markdown(self) -> str:
        """The full result for the run page: the summary, then what was validated."""
        facts = [["model", self.model_uri], ["kind", self.kind], ["data", self.data],
                 ["data hash", self.data_hash[:16]], ["model's run", self.model_run_id]]  # fmt: skip
        return "\n".join([self.summary(), markdown_table(["", ""], facts), ""])


def _labelled(link: Any) -> Any:
    """A run link shown as `run <8 characters>` (a 32-character id is too wide a label)."""
    if isinstance(link, Link):
        return Link(f"run {link.text[:8]}", link.url)
    return link

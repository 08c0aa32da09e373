"""Markdown for run pages and artifacts: links into MLflow, escaped cells, tables.

The study results (`tasks/<study>/result.py`: typed, frozen, with `to_dict()` for `--json` and
`markdown()` for the run page) build their Markdown with these."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()|~])")
#: HTML's own characters as entities: MLflow's run-page renderer (showdown) shows a backslash
#: before ``<`` or ``>`` literally in some contexts (``<u\>``, ``p \< 0.005`` seen in Chromium,
#: tests/browser/test_drive_run_page.py); entities render as the characters in MLflow and in
#: Prefect's artifact view, and never as markup
_HTML_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML = re.compile("[&<>]")


@dataclass(frozen=True)
class Link:
    """A link greylab makes (to an MLflow run): its text is escaped like any cell, its URL is
    percent-encoded (no parenthesis or space can end it early)."""

    text: str
    url: str


def mlflow_ui() -> str:
    """The MLflow web UI of the tracking server (`http(s)://…`); empty for a local store."""
    from runtime.settings import load_settings

    uri = load_settings().tracking_uri
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else ""


def run_ref(run_id: Any, experiment_id: str = "") -> Any:
    """An MLflow run id as a link to its page when a tracking server has one, opened in
    MLflow 3's model-training view (its UI starts in the GenAI view unless the URL says so;
    the short `#/runs/<id>` route redirects and drops that, hence the experiment)."""
    base = mlflow_ui()
    if not (base and run_id):
        return run_id
    page = f"experiments/{experiment_id}/runs/{run_id}" if experiment_id else f"runs/{run_id}"
    return Link(str(run_id), f"{base}/#/{page}?workflowType=machine_learning")


def cell(value: Any) -> str:
    """A value as one Markdown table cell: numbers to 4 digits, text from files or users with
    every Markdown special character backslash-escaped, ``& < >`` as HTML entities, and line
    breaks removed (a model or structure name cannot break the table, link anywhere or inject
    markup)."""
    if isinstance(value, Link):
        return f"[{cell(value.text)}]({quote(value.url, safe=':/#?=&%.-_~')})"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.4g}"
    text = " ".join(str(value).split())
    return _HTML.sub(lambda m: _HTML_SPECIAL[m.group()], _MARKDOWN_SPECIAL.sub(r"\\\1", text))


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "| " + " | ".join(cell(c) for c in columns) + " |"
    rule = "|" + "---|" * len(columns)
    return "\n".join([head, rule, *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows)])

"""`greylab ingest`: lab files from the inbox into the dataset; `greylab ingest withdraw`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from flows.cli_common import emit, stderr, stdout, table
from flows.cli_settings import with_settings
from flows.ingest.settings import IngestSettings
from ingestion.layout import CAMPAIGN_FILE
from runtime.settings import DATA_ROOT_DEFAULT, INBOX_DEFAULT, INBOX_DIR


def register(app: typer.Typer) -> None:
    # `greylab ingest [options]` ingests; `greylab ingest withdraw FILE|HASH`
    ingest_app = typer.Typer(add_completion=False, rich_markup_mode="markdown")
    ingest_app.callback(invoke_without_command=True)(ingest)
    ingest_app.command("withdraw")(withdraw)
    app.add_typer(ingest_app, name="ingest")


@with_settings(IngestSettings)
def ingest(
    settings: IngestSettings,
    inbox: Annotated[
        Path | None,
        typer.Option(
            help=f"Inbox folder; default $GREYLAB_INBOX, else {INBOX_DEFAULT} (with "
            f"--data-root: its {INBOX_DIR} folder)."
        ),
    ] = None,
    data_root: Annotated[
        Path | None,
        typer.Option(
            help=f"Dataset root (holds {CAMPAIGN_FILE}); default $GREYLAB_DATA_ROOT, else "
            f"{DATA_ROOT_DEFAULT}."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Ingest new lab files from the inbox: validate, append to the Parquet dataset, archive,
    quarantine bad files with an error report, never ingest the same content twice.

    Exit 1 if the data was stored but MLflow could not be reached (the summary says what was
    stored and what was not tracked). `greylab ingest withdraw FILE|HASH` takes an ingested
    file back out."""
    from typer._click.globals import get_current_context

    if get_current_context().invoked_subcommand is not None:
        return  # a subcommand (withdraw) runs instead of an ingestion
    from flows.ingest.flow import run_ingest

    # the folders are the CLI user's own (this process), never settings of the flow
    result = run_ingest(settings, inbox=inbox, data_root=data_root)
    emit(result, as_json=as_json, human=lambda: print_ingest_result(result))
    if (result.get("tracking") or {}).get("error"):
        if as_json:
            stderr.print(escape(result["tracking"]["message"]), soft_wrap=True, markup=True)
        raise typer.Exit(1)


def withdraw(
    reference: Annotated[
        str,
        typer.Argument(
            metavar="FILE|HASH",
            help="The ingested file: its content hash (at least 8 hex digits), the name it was "
            "ingested under, its archived original, or a copy of the file.",
        ),
    ],
    data_root: Annotated[
        Path | None,
        typer.Option(help=f"Dataset root; default $GREYLAB_DATA_ROOT, else {DATA_ROOT_DEFAULT}."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout.")] = False,
) -> None:
    """Take an ingested file back out of the dataset: a `withdrawn` ledger record, its dataset
    part removed, its archived original moved to `withdrawn/` (kept). Withdrawing again is
    harmless; a file that was never ingested is refused (exit 2) and nothing changes."""
    from ingestion.withdraw import withdraw as withdraw_file
    from runtime.settings import load_settings

    root = data_root.resolve() if data_root is not None else load_settings().data_root
    result = withdraw_file(root, reference).to_dict()
    emit(result, as_json=as_json,
         human=lambda: stdout.print(escape(result["message"]), soft_wrap=True, markup=True))  # fmt: skip


def print_ingest_result(result: dict[str, Any], console: Console | None = None) -> None:
    """Counts, then every file not ingested with its reason; file names and messages are
    file content, so rich markup in them is escaped."""
    console = console or stdout
    counts = result["counts"]
    console.print(table("Ingestion", list(counts), [list(counts.values())]))
    colour = {"quarantined": "red", "skipped": "yellow", "duplicate": "cyan"}
    for outcome in result["outcomes"]:
        status = outcome.get("status")
        if status in colour:
            message = str(outcome.get("message") or "")
            if status != "quarantined":
                message = message.splitlines()[0] if message else ""
            console.print(
                f"[{colour[status]}]{status}[/{colour[status]}] "
                f"{escape(str(outcome.get('name')))}: {escape(message)}",
                soft_wrap=True,
                markup=True,
            )
    console.print(
        f"stored: {result.get('rows', 0)} rows under {escape(str(result.get('data_root')))}",
        soft_wrap=True,
        markup=True,
    )
    tracking = result.get("tracking") or {}
    if tracking.get("message"):
        style = "red" if tracking.get("error") else "green"
        console.print(
            f"[{style}]{escape(tracking['message'])}[/{style}]", soft_wrap=True, markup=True
        )
    for study in result.get("studies") or []:
        console.print(
            escape(", ".join(f"{k}: {v}" for k, v in study.items())), soft_wrap=True, markup=True
        )

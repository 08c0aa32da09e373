"""`greylab cache …`: where the cross-run result cache lives, and emptying it."""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli_common import emit, stdout

app = typer.Typer(
    rich_markup_mode="markdown",
    help="The cross-run result cache of the study steps (`tasks/cache.py` says what a key holds).",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="cache")


@app.command()
def info(as_json: JsonOpt = False) -> None:
    """Show the cache folder, its size, the expiry and this installation's code fingerprint."""
    from tasks.cache import cache_info

    result = cache_info()
    emit(
        result,
        as_json=as_json,
        human=lambda: stdout.print(
            f"cache {result['cache_dir']}: {result['files']} file(s), {result['bytes']} bytes; "
            f"entries expire after {result['expiry_days']:g} days; "
            f"code fingerprint {result['code_fingerprint']}",
            markup=False,
        ),
    )


@app.command()
def clear(as_json: JsonOpt = False) -> None:
    """Delete every cached result (the next runs recompute every step). Only cache entries
    inside the cache folder greylab created (it carries a `.greylab-cache` marker) are
    deleted; any other folder is refused (exit 2) and nothing is deleted."""
    from tasks.cache import clear_cache

    result = clear_cache()
    kept = f"; kept {result['files_kept']} other file(s)" if result["files_kept"] else ""
    emit(
        result,
        as_json=as_json,
        human=lambda: stdout.print(
            f"removed {result['files_removed']} file(s), {result['bytes_removed']} bytes "
            f"from {result['cache_dir']}{kept}",
            markup=False,
        ),
    )

"""Shared pieces of the command line: output (human or `--json`), progress bars, options."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from flows.progress import progress_sink
from methods.errors import InputError

#: `--json` of every command that prints a result
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]

# Without a terminal (logs, CI) rich would wrap at 80 columns: tables of estimates need more.
_WIDTH = None if sys.stdout.isatty() else 120
# markup=False: nothing printed through these consoles is read as rich markup, so a sensor,
# column, file name or message containing `[/x]` prints as itself (file content and user input
# reach every table and message). Styled output passes `markup=True` with `safe()` pieces.
stderr = Console(stderr=True, width=_WIDTH, markup=False)
stdout = Console(width=_WIDTH, markup=False)


MAX_MESSAGE = 2000  # characters of one error message (input quoted in it is cut centrally)
MAX_QUOTE = 200  # characters of one quoted input value


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` cut to about `limit` characters: head and tail kept, the middle elided with
    the number of characters left out (error messages never echo a whole hostile input)."""
    text = str(text)
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 20)
    head, tail = text[: keep * 3 // 4], text[-(keep // 4) :]
    return f"{head} ... [{len(text) - len(head) - len(tail)} characters cut] ... {tail}"


def quote(value: Any, limit: int = MAX_QUOTE) -> str:
    """`repr` of a user-supplied value for an error message, at most about `limit` chars."""
    return clip(repr(value), limit)


def safe(value: Any) -> str:
    """Text from files or the user, escaped for rich markup (`[/x]` prints as itself)."""
    return escape(str(value))


def say(text: Any, *, err: bool = False) -> None:
    """Print plain text (file content, names, user input) without markup interpretation."""
    (stderr if err else stdout).print(str(text), markup=False, highlight=False)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def emit(result: dict[str, Any], *, as_json: bool, human: Callable[[], None]) -> None:
    """Print `result` as JSON on stdout (`--json`) or let `human()` render it for people."""
    if as_json:
        sys.stdout.write(json.dumps(_plain(result), indent=2) + "\n")
    else:
        human()


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    """A rich table; title, headers and cells print literally (they may come from files)."""
    out = Table(title=Text(str(title)), title_justify="left")
    for column in columns:
        out.add_column(Text(str(column)))
    for row in rows:
        out.add_row(*[Text(format_cell(v)) for v in row])
    return out


def frame_table(title: str, frame: Any) -> Table:
    """A pandas DataFrame as a table, every column shown."""
    return table(title, [str(c) for c in frame.columns], frame.astype(object).values.tolist())


def format_cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return f"{value:.4g}"
    return str(value)


@contextlib.contextmanager
def progress_bars(enabled: bool = True) -> Iterator[None]:
    """Progress bars on stderr for every `flows.progress.Progress` reported inside."""
    if not enabled:
        yield
        return
    bars = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=False,
    )
    ids: dict[str, Any] = {}

    def update(label: str, done: int, total: int) -> None:
        if label not in ids:
            ids[label] = bars.add_task(safe(label), total=total)
        bars.update(ids[label], completed=done, total=total)

    with bars, progress_sink(update):
        yield


def parse_overrides(items: list[str] | None, option: str = "--set") -> dict[str, float]:
    """`--set name=value` pairs into a dict; a malformed pair is an InputError."""
    overrides: dict[str, float] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"{option} expects name=value, got {quote(item)}")
        try:
            overrides[name.strip()] = float(raw)
        except ValueError:
            raise InputError(
                f"{option} {clip(name, MAX_QUOTE)}: {quote(raw)} is not a number"
            ) from None
    return overrides


def allow_typed_models(references: list[str]) -> None:
    """The CLI user's own model references (docs/trust.md) join the run's allow-list,
    and a model file in the current folder becomes importable as ``file:attribute`` (as with
    ``python -m``), for this process and the workers it starts: only then, so no other
    command imports from the folder it runs in. Appended last: never shadows an installed
    module. Not exported through ``PYTHONPATH`` (whose entries come *before* the standard
    library in a child): local Dask workers are spawned with this process's ``sys.path``."""
    from models.registry import BUILTIN, allow_models

    allow_models(references)
    if all(r in BUILTIN for r in references):
        return
    here = os.getcwd()
    if here not in sys.path:
        sys.path.append(here)


def split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def split_lists(values: str | list[str] | tuple[str, ...]) -> list[str]:
    """A repeatable option whose values may be comma-separated, as one flat list."""
    return [v for item in ([values] if isinstance(values, str) else values)
            for v in split_list(item)]  # fmt: skip


def means_all(text: object) -> bool:
    """``all`` or ``0``: the command line's word for "no limit" (an empty form field)."""
    return str(text).strip().lower() in {"0", "all"}


TABLE_SUFFIXES = (".parquet", ".pq", ".csv")
#: figure formats greylab writes (matplotlib's raster and vector backends)
FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")
OVERWRITE_HELP = "Replace output files that exist (without it an existing file is refused)."


def check_output(
    path: Path, *, option: str, suffixes: tuple[str, ...], overwrite: bool = False
) -> Path:
    """An output file named on the command line, checked before any work (and before a run is
    tracked): a suffix greylab writes, a name the file system accepts, an existing folder,
    and no existing file unless `overwrite` (outputs are never replaced silently)."""
    if path.suffix.lower() not in suffixes:
        raise InputError(
            f"{option} {quote(str(path))}: unsupported file type {path.suffix or '(none)'!r}; "
            f"use a {', '.join(suffixes[:-1])} or {suffixes[-1]} file name"
        )
    try:
        exists = path.exists() or path.is_symlink()
        folder_ok = path.parent.is_dir()
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise InputError(f"{option} {quote(str(path))}: {exc.strerror}") from None
    if not folder_ok:
        raise InputError(f"{option} {quote(str(path))}: folder {path.parent} does not exist")
    if exists and not overwrite:
        raise InputError(
            f"{option} {quote(str(path))}: the file exists; give --overwrite to replace it"
        )
    if exists and path.is_dir():
        raise InputError(f"{option} {quote(str(path))}: is a folder, not a file")
    return path


def _written(path: Path, option: str, write: Callable[[Any], Any], overwrite: bool) -> Path:
    from schemas.storage import write_atomic

    try:
        return write_atomic(path, write, readable=True, replace=overwrite)
    except FileExistsError:  # created by someone else since the check
        raise InputError(
            f"{option} {quote(str(path))}: the file exists; give --overwrite to replace it"
        ) from None


def write_table(frame: Any, out: Path, *, option: str = "--out", overwrite: bool = False) -> Path:
    """A table to .parquet or .csv by the file name's suffix, atomically (a reader never
    sees half a file), readable (mode 0666 minus the umask); an existing file is replaced
    only with `overwrite`, and then only by a complete one."""
    check_output(out, option=option, suffixes=TABLE_SUFFIXES, overwrite=overwrite)
    if out.suffix.lower() in {".parquet", ".pq"}:
        return _written(out, option, lambda h: frame.to_parquet(h, index=False), overwrite)
    return _written(out, option, lambda h: frame.to_csv(h, index=False), overwrite)


def save_figure(
    figure: Any, out: Path, *, option: str = "--figure", overwrite: bool = False
) -> Path:
    """A matplotlib figure saved atomically and readable, in the format of its suffix."""
    import io

    import matplotlib.pyplot as plt

    check_output(out, option=option, suffixes=FIGURE_SUFFIXES, overwrite=overwrite)
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format=out.suffix.lower().lstrip("."), dpi=110)
    finally:
        plt.close(figure)
    return _written(out, option, lambda h: h.write(buffer.getvalue()), overwrite)

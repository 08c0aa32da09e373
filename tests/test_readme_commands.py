"""Every `greylab` command shown in the README and docs parses with today's CLI (commands,
option names, option values), and every input file it reads is shipped in the repository or
made by an earlier command of the same document. A renamed option or a missing example file
fails here, not in a user's shell."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INPUT_OPTIONS = ("--data", "--sheet", "--demand", "--validation-data")
# generic names the text defines as "your file" (usage lines, not runnable examples)
PLACEHOLDERS = {"rec.parquet", "rec2.parquet", "FILE.yaml", "TABLE", "REC"}
VALUES = {"N": "3", "K": "2"}  # placeholder numbers in usage lines


def _blocks(text: str) -> list[str]:
    """The shell blocks (fence language bash, sh or none) of a Markdown text."""
    blocks, current, language = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, language = [], line[3:].strip()
            else:
                if language in ("", "bash", "sh"):
                    blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _commands(path: Path) -> list[tuple[str, str, list[str]]]:
    """(cwd, line, earlier lines) of every greylab command in the document's shell blocks."""
    found = []
    earlier: list[str] = []
    for block in _blocks(path.read_text(encoding="utf-8")):
        cwd = ""
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("cd "):
                cwd = line[3:].split("#")[0].strip()
            command = re.split(r"\s#\s", line)[0].strip().rstrip("&").strip()
            words = command.split()
            if words and words[0].removeprefix(".venv/bin/") == "greylab":
                found.append((cwd, command, list(earlier)))
            earlier.append(line)
    return found


def _args(line: str) -> list[str]:
    args = shlex.split(line.replace("[", " ").replace("]", " "))[1:]
    return [VALUES.get(a, a).split("|")[0] for a in args]  # `a|b|c`: one of the choices


def _command(args: list[str]) -> tuple[Any, list[str]]:
    from flows.cli import build_app

    command: Any = typer.main.get_command(build_app())
    while hasattr(command, "commands") and args and not args[0].startswith("-"):
        command, args = command.commands[args[0]], args[1:]
    return command, args


CASES = [(path.name, *case) for path in DOCUMENTS for case in _commands(path)]


def test_the_documents_show_commands() -> None:
    names = {name for name, *_ in CASES}
    assert {"README.md", "models.md", "inverse.md"} <= names and len(CASES) > 30


@pytest.mark.parametrize(("doc", "cwd", "line", "earlier"), CASES, ids=[c[2][:70] for c in CASES])
def test_a_documented_command_parses_and_its_inputs_exist(
    doc: str, cwd: str, line: str, earlier: list[str]
) -> None:
    command, args = _command(_args(line))
    if "--help" not in args:
        command.make_context(command.name, list(args))  # raises on unknown options or values
    made = " ".join(earlier)
    for option, value in itertools.pairwise(args):
        if option not in INPUT_OPTIONS or value in PLACEHOLDERS:
            continue
        shipped = (ROOT / cwd / value).exists()
        produced = value in made or value.replace(".sensors.csv", ".csv") in made
        assert shipped or produced, f"{doc}: `{line}` reads {value}, neither shipped nor made"

"""Command-line options come from the settings models: one declaration per setting."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from pydantic import BaseModel, Field
from typer.core import TyperOption
from typer.testing import CliRunner

from flows.cli_settings import Cli, option_name, settings_from_cli, with_settings
from flows.drive.settings import DriveSearch
from flows.ingest.settings import IngestSettings
from flows.inverse.settings import InverseStudy
from flows.press.settings import PressStudy
from methods.errors import InputError


class Colour(StrEnum):
    """red: warm; blue: cold."""

    red = "red"
    blue = "blue"


class Toy(BaseModel):
    count: Annotated[int, Cli(name="n")] = Field(3, ge=1, le=9, description="How many")
    colour: Colour = Field(Colour.blue, description="Which colour")
    names: list[str] = Field(default_factory=lambda: ["a", "b"], description="Names")
    table: Annotated[str | None, Cli(path=True)] = Field(None, description="A table")
    keep: Annotated[int | None, Cli(zero_is_none=True)] = Field(2, description="Kept; 0 = all")
    scales: Annotated[dict[str, float], Cli(name="scale")] = Field(default_factory=dict)
    fast: bool = Field(True, description="Go fast")
    wait: Annotated[float, Cli(default=5.0)] = Field(60.0, description="Seconds")
    secret: Annotated[int, Cli(hidden=True)] = 7


def _command(model: type[BaseModel]) -> tuple[typer.Typer, list[Any]]:
    app = typer.Typer(add_completion=False)
    seen: list[Any] = []

    @app.command()
    @with_settings(model)
    def go(study: Any, loud: Annotated[bool, typer.Option("--loud")] = False) -> None:
        seen.append((study, loud))

    return app, seen


def _options(app: typer.Typer) -> dict[str, TyperOption]:
    command = typer.main.get_command(app)
    return {o.opts[0]: o for o in command.params if isinstance(o, TyperOption)}


def test_every_visible_field_is_an_option_with_its_default_help_range_and_choices() -> None:
    app = _command(Toy)[0]
    options = _options(app)
    assert set(options) == {"--n", "--colour", "--names", "--table", "--keep", "--scale",
                            "--fast", "--wait", "--loud"}  # fmt: skip
    assert options["--n"].default == 3 and "How many (>= 1, <= 9)" in (options["--n"].help or "")
    refused = CliRunner().invoke(app, ["--colour", "green"])
    assert refused.exit_code == 2 and "red" in refused.output and "blue" in refused.output
    assert "red: warm; blue: cold." in (options["--colour"].help or "")
    assert options["--names"].default == ["a,b"]  # repeatable, each value comma-separated
    assert options["--fast"].secondary_opts == ["--no-fast"]
    assert options["--wait"].default == 5.0  # the command line's own default


def test_parsed_options_become_the_settings_model(tmp_path: Path) -> None:
    app, seen = _command(Toy)
    (tmp_path / "t.csv").write_text("x\n1\n")
    args = ["--n", "5", "--colour", "RED", "--names", "x, y", "--table", str(tmp_path / "t.csv"),
            "--keep", "0", "--scale", "J=2", "--scale", "c=0.5", "--no-fast", "--loud"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    study, loud = seen[0]
    assert loud is True
    assert study == Toy(count=5, colour=Colour.red, names=["x", "y"],
                        table=str((tmp_path / "t.csv").resolve()), keep=None,
                        scales={"J": 2.0, "c": 0.5}, fast=False, wait=5.0)  # fmt: skip
    CliRunner().invoke(app, [])
    assert seen[1][0] == Toy(wait=5.0)


def test_a_list_is_repeatable_comma_separated_and_reachable_by_its_alias() -> None:
    class Listed(BaseModel):
        models: Annotated[list[str], Cli(name="model", aliases=("--models",))] = ["M1"]
        keep: Annotated[int | None, Cli(zero_is_none=True)] = 2

    app, seen = _command(Listed)
    for args, expected in (
        (["--model", "a", "--model", "b,c"], ["a", "b", "c"]),
        (["--models", "a,b"], ["a", "b"]),
        (["--model", "a", "--models", "b"], ["a", "b"]),
        ([], ["M1"]),
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert seen[-1][0].models == expected
    for word, kept in (("all", None), ("ALL", None), ("0", None), ("3", 3)):
        assert CliRunner().invoke(app, ["--keep", word]).exit_code == 0
        assert seen[-1][0].keep == kept
    with pytest.raises(InputError, match=r"--keep: Input should be a valid integer"):
        settings_from_cli(Listed, {"keep": "many"})


def test_an_invalid_value_names_the_option_not_the_field() -> None:
    with pytest.raises(InputError, match=r"--n: Input should be less than or equal to 9"):
        settings_from_cli(Toy, {"count": 10})
    with pytest.raises(InputError, match=r"--scale expects name=value"):
        settings_from_cli(Toy, {"scales": ["J"]})


@pytest.mark.parametrize(
    ("path", "model", "own"),
    [
        (["press", "detect"], PressStudy, {"--runner", "--workers", "--json"}),
        (["drive", "identify"], DriveSearch, {"--runner", "--json"}),
        (
            ["inverse", "run"],
            InverseStudy,
            {"--demand", "--out", "--overwrite", "--track", "--json"},
        ),
        (["ingest"], IngestSettings, {"--inbox", "--data-root", "--json"}),
    ],
)
def test_study_commands_declare_only_their_own_options(
    path: list[str], model: type[BaseModel], own: set[str]
) -> None:
    from flows.cli import build_app

    command: Any = typer.main.get_command(build_app())
    for name in path:
        command = command.commands[name]
    options = {o.opts[0]: o for o in command.params if isinstance(o, TyperOption)}
    fields = {
        option_name(name, field): field
        for name, field in model.model_fields.items()
        if not any(isinstance(m, Cli) and m.hidden for m in field.metadata)
    }
    assert set(options) == set(fields) | own
    for flag, field in fields.items():
        assert (field.description or "") in (options[flag].help or "")

"""Command-line options derived from a study's settings model (the single source of truth).

A study command declares only what belongs to the command line itself (runner, `--json`, ...);
every setting of the study becomes an option with the field's name in kebab case (or the name
given by `Cli`), its default, its description as help, its range, and its Enum's choices:

    @app.command()
    @with_settings(PressStudy)
    def detect(study: PressStudy, as_json: JsonOpt = False) -> None: ...

Adding a field to the settings model adds the option; nothing is declared twice.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import annotated_types
import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from flows.cli_common import means_all, parse_overrides, split_lists
from flows.data_refs import allow_data_paths
from methods.errors import InputError


@dataclass(frozen=True)
class Cli:
    """How one settings field appears on the command line. Put it in the field's annotation
    (``Annotated[int, Cli(name="tests")]``): pydantic keeps it as metadata, the JSON schema
    (the Prefect form) does not see it.

    ``name``: option name without ``--`` (default: the field name in kebab case); ``path``: a
    file path, resolved to an absolute path; ``zero_is_none``: ``--name 0`` means "none" (the
    empty field of the form; ``--name all`` says the same); ``hidden``: a setting of the dashboard and API only;
    ``default``: the command line's default where it differs from the form's (e.g. a shorter
    settle window for a person at a terminal); ``aliases``: further option names (an old
    spelling kept working, e.g. ``("--models",)``).

    A list field is a repeatable option whose values may also be comma-separated:
    ``--model M1 --model M2`` and ``--model M1,M2`` are the same list."""

    name: str | None = None
    path: bool = False
    zero_is_none: bool = False
    hidden: bool = False
    default: Any = None
    aliases: tuple[str, ...] = ()


def cli_of(field: FieldInfo) -> Cli:
    return next((m for m in field.metadata if isinstance(m, Cli)), Cli())


def option_name(name: str, field: FieldInfo) -> str:
    return "--" + (cli_of(field).name or name.replace("_", "-"))


def _without_none(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (annotation, False)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _range(field: FieldInfo) -> str:
    """The field's bounds as help text, e.g. ``>= 1, <= 100000``."""
    words = {annotated_types.Ge: ("ge", ">="), annotated_types.Gt: ("gt", ">"),
             annotated_types.Le: ("le", "<="), annotated_types.Lt: ("lt", "<")}  # fmt: skip
    parts = []
    for item in field.metadata:
        for kind, (attribute, sign) in words.items():
            if isinstance(item, kind):
                parts.append(f"{sign} {getattr(item, attribute)}")
    return ", ".join(parts)


def _help(field: FieldInfo, kind: Any) -> str:
    text = field.description or ""
    if isinstance(kind, type) and issubclass(kind, enum.Enum) and kind.__doc__:
        doc = inspect.cleandoc(kind.__doc__)
        if doc and not doc.startswith("An enumeration"):
            text = f"{text}. {doc}" if text else doc
    bounds = _range(field)
    return f"{text} ({bounds})" if bounds else text


def _default(field: FieldInfo) -> Any:
    cli_default = cli_of(field).default
    if cli_default is not None:
        return cli_default
    return field.get_default(call_default_factory=True)


def _parameter(name: str, field: FieldInfo) -> inspect.Parameter:
    """The typer option of one settings field."""
    cli = cli_of(field)
    kind, optional = _without_none(field.annotation)
    default = _default(field)
    flag = option_name(name, field)
    text = _help(field, kind)
    origin = typing.get_origin(kind)
    if cli.path:
        kind = Path | None if optional else Path
    elif kind is bool:
        flag = f"{flag}/--no-{flag[2:]}"
    elif origin is list:  # repeatable, each value comma-separated
        kind = list[str]
        default = [",".join(str(getattr(v, "value", v)) for v in default or [])]
    elif origin is dict:  # repeated name=value
        kind, default = list[str] | None, None
    elif optional and cli.zero_is_none:  # a number, or 0 / "all" for none
        kind, default = str, "all" if default is None else str(default)
    elif optional:
        kind = kind | None
    option = typer.Option(flag, *cli.aliases, help=text, case_sensitive=False)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
    )


def settings_from_cli(model: type[BaseModel], values: dict[str, Any]) -> Any:
    """The settings model from the parsed options (the inverse of `_parameter`); invalid
    values are an InputError naming the option."""
    kwargs: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if name not in values:
            continue
        cli, value = cli_of(field), values[name]
        origin = typing.get_origin(_without_none(field.annotation)[0])
        if cli.path and value is not None:
            text = str(value)  # campaign:NAME: ingested data by reference, taken as is
            value = text if text.startswith("campaign:") else str(Path(value).resolve())
            allow_data_paths([value])  # the trusted CLI user's own file (flows/data_refs.py)
        elif origin is list:
            value = split_lists(value)
        elif origin is dict:
            value = parse_overrides(value, option=option_name(name, field))
        elif cli.zero_is_none and means_all(value):
            value = None
        kwargs[name] = value
    try:
        return model(**kwargs)
    except ValidationError as exc:
        raise InputError(settings_message(exc, model)) from None


def settings_message(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line per invalid setting, named as the command line names it."""
    fields = model.model_fields if model is not None else {}
    parts = []
    for error in exc.errors():
        loc = ".".join(map(str, error["loc"]))
        head = str(error["loc"][0]) if error["loc"] else ""
        if head in fields:
            loc = option_name(head, fields[head]) + loc[len(head) :]
        parts.append(f"{loc}: {error['msg']}" if loc else error["msg"])  # loc: whole model
    return "invalid settings: " + "; ".join(parts)


def explained(text: str, choices: type) -> str:
    """A field description followed by its Enum's one-line explanation of every choice (the
    Prefect form shows a field's description, not its type's)."""
    return f"{text}. {' '.join((choices.__doc__ or '').split())}"


def with_settings(
    model: type[BaseModel], prepare: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn ``command(study, **own_options)`` into a typer command whose options are the
    settings model's fields (see module docstring) followed by the command's own options.
    ``prepare(options)`` runs on the parsed options before the settings are validated."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in list(inspect.signature(command, eval_str=True).parameters.values())[1:]
        ]
        own_names = {p.name for p in own}
        derived = [
            _parameter(name, field)
            for name, field in model.model_fields.items()
            if not cli_of(field).hidden and name not in own_names
        ]

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            settings = {k: values.pop(k) for k in list(values) if k not in own_names}
            if prepare is not None:
                prepare(settings)
            return command(settings_from_cli(model, settings), **values)

        parameters = derived + own
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters}
        del run.__wrapped__  # typer must read the derived signature, not the command's
        return run

    return wrap

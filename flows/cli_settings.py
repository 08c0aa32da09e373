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
        file path, resolved to an absolute path; ``zero_is_none``: ``--name 0`` means "none" (``--name all``
        says the same; the form shows the field as a required number from 0, and the settings
        model reads 0 as None, e.g. ``PressStudy._all_sensors``); ``hidden``: a setting of the dashboard and API only;
        ``default``: the command line's default where it differs from the form's (e.g. a shorter
        settle window for a person at a terminal); ``aliases``: further option names (an old
        spelling kept working, e.g. ``("--models",)``); ``note``: words for the command line's help
    only, e.g. how to say "empty" there (the form's description names no option).

        A list field is a repeatable option whose values may also be comma-separated:
        ``--model M1 --model M2`` and ``--model M1,M2`` are the same list."""

    name: str | None = None
    path: bool = False
    zero_is_none: bool = False
    hidden: bool = False
    default: Any = None
    aliases: tuple[str, ...] = ()
    note: str = ""  # said in the option's help only (the form speaks without option names)


@dataclass(frozen=True)
class Limit:
    """The field's maximum (a number, or a list's length) is the worker's limit `variable`
    (`models.limits.limit`), divided by `per` (generations: evaluations over the smallest
    population); read when the Prefect form's schema or the command's options are built, so
    the form offers what the worker will run. The settings' validators still check the
    value against the limit of the machine that runs it."""

    variable: str
    per: int = 1

    def maximum(self) -> int:
        from models.limits import limit

        return max(1, limit(self.variable) // self.per)


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
                bound = getattr(item, attribute)
                bound = 0 if cli_of(field).zero_is_none and sign == ">=" else bound  # 0 = none
                parts.append(f"{sign} {bound}")
        if isinstance(item, Limit) and _without_none(field.annotation)[0] in (int, float):
            parts.append(f"<= {item.maximum()}")
    return ", ".join(parts)


def _help(field: FieldInfo, kind: Any) -> str:
    text = field.description or ""
    note = cli_of(field).note
    text = f"{text} ({note})" if note and text else note or text
    if isinstance(kind, type) and issubclass(kind, enum.Enum) and kind.__doc__:
        doc = inspect.cleandoc(kind.__doc__)
        said = " ".join(text.split())  # `explained` may have put the choices in already
        if doc and not doc.startswith("An enumeration") and " ".join(doc.split()) not in said:
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
    if field.is_required() and cli.default is None:  # no default: the option is required
        default = inspect.Parameter.empty
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


# -- the Prefect form ---------------------------------------------------------------------------


def lab_form(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """The settings model's JSON schema as the Prefect form shows it (`model_config =
    ConfigDict(json_schema_extra=lab_form)`): every field that cannot be empty is `required`
    (the form labels it without "(Optional)", and text typed into a number field, which
    leaves the field empty, is refused instead of sent as nothing, which would run the
    default), `Limit` maxima from the worker's limits, a choice of an Enum inline (no class
    name on the form), the range of every number at the end of its description.

    An optional field (`X | None = None`, empty means something) is a plain field of its
    value's type, not required and without a default (`_plain`): the Prefect UI shows an
    `anyOf` with a null alternative as a toggle whose null side says 'Property is type
    "None"'. The form leaves such a field out when it is empty (the settings model fills
    in None) and sends the null of a prefilled default as it is: Prefect's schema check, in
    the form and on the server (`preprocess_schema`), lets a field that is neither required
    nor has a default be null. An optional number whose default is a number and whose
    zero means none (`Cli(zero_is_none=True)`, e.g. the press's sensors: 0 = all) is a
    required number from 0 (the settings model reads 0 as None).

    The form checks the schema before it submits, and the server again, because deployments
    enforce their parameter schema (`enforce_parameter_schema`, Prefect's default; the form's
    "Validate parameters" box starts from it). An API caller who sends some settings only
    starts the run with the schema check off (`deployments.runs.run_deployment`, the REST
    field `enforce_parameter_schema: false`): the flow's settings model fills in the defaults
    and checks every value, failing the run once with the message (docs/operations.md)."""
    properties = schema.get("properties", {})
    required = []
    for name, field in model.model_fields.items():
        prop = properties.get(name)
        if prop is None:
            continue
        kind, optional = _without_none(field.annotation)
        prop.setdefault("title", name.replace("_", " ").title())
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            _inline_enum(prop, kind)
        if optional and _plain(prop) and "default" in prop and cli_of(field).zero_is_none:
            prop["minimum"] = 0  # a number by default, required: 0 says none
            optional = False
        if not optional:
            required.append(name)
        for item in field.metadata:
            if isinstance(item, Limit):
                target = _non_null(prop)
                target["maxItems" if target.get("type") == "array" else "maximum"] = item.maximum()
        for alternative in prop.get("anyOf", []):
            alternative.setdefault("title", prop.get("title", name))
        bounds = _bounds(_non_null(prop))
        if bounds and prop.get("description"):
            prop["description"] = f"{prop['description']} (range: {bounds})"
    schema["required"] = required


def _plain(prop: dict[str, Any]) -> bool:
    """An optional field's `anyOf: [value, null]` as the value's schema itself, without a
    null default (`lab_form`); a choice keeps null among its values, so a prefilled null
    passes the check of its choices. False (unchanged) for anything else."""
    alternatives = prop.get("anyOf", [])
    values = [a for a in alternatives if a.get("type") != "null"]
    if len(values) != 1 or len(alternatives) != 2:
        return False
    del prop["anyOf"]
    prop.update({k: v for k, v in values[0].items() if k != "title"})
    if "enum" in prop:
        prop["enum"] = [*prop["enum"], None]
    if "default" in prop and prop["default"] is None:
        del prop["default"]
    return True


def _non_null(prop: dict[str, Any]) -> dict[str, Any]:
    """The schema of an optional field's value (its non-null alternative), else `prop`."""
    values = [a for a in prop.get("anyOf", []) if a.get("type") != "null"]
    return values[0] if len(values) == 1 else prop


def _inline_enum(prop: dict[str, Any], kind: type[enum.Enum]) -> None:
    choice = {"type": "string", "enum": [m.value for m in kind], "title": prop.get("title", "")}
    if "$ref" in prop:
        del prop["$ref"]
        prop.update({k: v for k, v in choice.items() if k != "title"})
    for i, alternative in enumerate(prop.get("anyOf", [])):
        if "$ref" in alternative:
            prop["anyOf"][i] = choice
    prop.pop("allOf", None)


def _bounds(prop: dict[str, Any]) -> str:
    """`1 to 10,000`, `> 0 and < 1`, `>= 0` from a number's schema; '' for no number."""
    if prop.get("type") not in ("integer", "number"):
        return ""

    def shown(value: float) -> str:
        return f"{value:,}" if isinstance(value, int) else f"{value:g}"

    low: tuple[str, float] | None = (">= ", prop["minimum"]) if "minimum" in prop else None
    low = ("> ", prop["exclusiveMinimum"]) if "exclusiveMinimum" in prop else low
    high: tuple[str, float] | None = ("<= ", prop["maximum"]) if "maximum" in prop else None
    high = ("< ", prop["exclusiveMaximum"]) if "exclusiveMaximum" in prop else high
    if low and high and low[0] == ">= " and high[0] == "<= ":
        return f"{shown(low[1])} to {shown(high[1])}"
    return " and ".join(f"{sign}{shown(value)}" for sign, value in filter(None, (low, high)))

"""The settings reference: every ``DRAGOMAN_*`` variable with its type, default and description, as Markdown.

Rendered from ``Settings.model_fields`` in the groups of :data:`contract.settings.SECTIONS`, so the
documented table cannot drift from the code: the docs page is this function's output, and a test
compares them. ``python -m contract.settings_reference`` prints it.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic.fields import FieldInfo

from contract.settings import SECTIONS, Settings

ENV_PREFIX = "DRAGOMAN_"


def settings_reference(heading_level: int = 2) -> str:
    """The settings as Markdown: a heading per group (``heading_level`` #s), then a table of its variables
    (variable, type, default, description)."""
    parts: list[str] = []
    fields = Settings.model_fields
    for title, about, names in SECTIONS:
        parts += [f"{'#' * heading_level} {title}", "", about, ""]
        parts += ["| Variable | Type | Default | Description |", "| --- | --- | --- | --- |"]
        for name in names:
            field = fields[name]
            cells = (f"`{env_name(name)}`", type_name(field.annotation), default_text(field), description(field))
            parts.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        parts.append("")
    return "\n".join(parts)


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell (no column break, no HTML tag)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def env_name(name: str) -> str:
    """The environment variable that sets the field ``name``."""
    return ENV_PREFIX + name.upper()


def type_name(annotation: Any) -> str:
    """A field's type as a reader of the docs writes the value: integer, number, true/false, a choice ..."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        named = [type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(named)
    if origin is Literal:
        return "one of " + ", ".join(f"`{value}`" for value in args)
    if origin is list:
        return f"JSON list of {type_name(args[0])}s" if args else "JSON list"
    simple = {str: "string", int: "integer", float: "number", bool: "true/false", Path: "path"}
    if annotation in simple:
        return simple[annotation]
    return "CIDR network" if "Network" in getattr(annotation, "__name__", "") else str(annotation)


def default_text(field: FieldInfo) -> str:
    """A field's default as the docs show it (unset for None, the home folder as ``~``)."""
    default = field.get_default(call_default_factory=True)
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "`true`" if default else "`false`"
    if isinstance(default, Path):
        home = Path.home()
        shown = f"~/{default.relative_to(home)}" if default.is_relative_to(home) else str(default)
        return f"`{shown}`"
    if isinstance(default, list):
        return f"`{default}`" if default else "`[]`"
    if default == "":
        return "empty"
    return f"`{default}`"


_BOUNDS = ((annotated_types.Gt, ">"), (annotated_types.Ge, "≥"), (annotated_types.Lt, "<"), (annotated_types.Le, "≤"))


def description(field: FieldInfo) -> str:
    """A field's description, with the bounds a value must keep (``> 0``)."""
    text = field.description or ""
    bounds = [
        f"{sign} {getattr(item, kind.__name__.lower())}"
        for item in field.metadata
        for kind, sign in _BOUNDS
        if isinstance(item, kind)
    ]
    return f"{text} ({', '.join(bounds)})" if bounds else text


if __name__ == "__main__":
    print(settings_reference())

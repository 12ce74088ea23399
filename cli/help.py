"""How ``dragoman ... --help`` reads: a description on every command, examples in its epilog.

Every command's ``--help`` says what it does (``description``), and a command that takes an id
shows an example; ``tests/cli/test_help.py`` walks the parser and holds every command and
argument to a non-empty help.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import TypeAlias

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that text paragraphs are wrapped one by one and indented lines kept.

    A description can then have several paragraphs and a list (``  list: ...``), and an epilog of
    examples comes out line for line, where the stock formatter would run them all together.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = text.strip("\n").split("\n\n")
        filled = []
        for paragraph in paragraphs:
            lines = paragraph.splitlines()
            if any(line.startswith(" ") for line in lines):
                filled.append("\n".join(indent + line for line in lines))
            else:
                filled.append(textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent))
        return "\n\n".join(filled)


def choices(intro: str, *items: tuple[str, str]) -> str:
    """A description: ``intro``, then one indented line per choice (``name: what it does``)."""
    width = max(len(name) for name, _ in items) + 1
    return intro + "\n\n" + "\n".join(f"  {name + ':':<{width}} {text}" for name, text in items)


def examples(*lines: str) -> str:
    """An epilog listing example invocations, one a line."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def add_command(
    sub: SubParsers,
    name: str,
    *,
    help: str,
    description: str | None = None,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand: ``help`` in the parent's list, ``description`` (else ``help``) atop its own ``--help``."""
    text = description or help[:1].upper() + help[1:].rstrip(".") + "."
    return sub.add_parser(name, help=help, description=text, epilog=epilog, formatter_class=HelpFormatter)


EXAMPLE_ID = "3f2b9c1e-8d4a-4b6e-9a57-0c1d2e3f4a5b"
"""A job (or run, or document) id as the examples show it."""

MODEL_HELP = (
    "a served model's name or alias (GET /v1/models, `dragoman stats`); default: DRAGOMAN_MODEL_ROUTES' choice, "
    "else DRAGOMAN_DEFAULT_MODEL"
)
"""The help text of every ``--model`` that names the served model a job goes to."""

"""Placeholders: the one grammar for the variables a message carries through translation.

A translation must keep every placeholder of its source, exactly as written (the program fills
them in later), and invent none. The gettext splitter hides them from the model as unit tags
(:data:`PLACEHOLDER`), and the ``placeholders`` quality flag compares the multisets of the source
and the translation (:func:`placeholders`). Both use this grammar, so they agree on what a
placeholder is.

Recognised:

- printf, as C, POSIX, Python ``%`` and Objective-C write it: ``%s``, ``%d``, ``%-5.2f``,
  ``%1$s`` (positions), ``%*d`` and ``%1$*2$d`` (widths from arguments), ``%ld``, ``%lld``,
  ``%zu``, ``%ls``, ``%S``, ``%(name)s``, ``%@`` and ``%1$@``; glibc's ``%m``, ``%Zu`` and ``%Id``;
  Windows' ``%I64d``; and gettext's spelling of ``<inttypes.h>`` macros, ``%<PRId64>`` and
  ``%#<PRIx64>`` (a catalogue's form of C's ``"%" PRId64``; without it the ``<PRId64>`` would
  read as an HTML tag and the ``%`` before it would reach the model). ``%%`` is a literal
  percent sign, never a placeholder (it is matched, so that ``%%s`` is not read as ``%s``, and the
  gettext splitter keeps it out of the model's reach). POSIX's grouping flag ``'`` is recognised
  before a numeric conversion (``%'d``, ``%'.2f``, ``%1$'d``); the space flag is not: ``50% de``
  in prose would otherwise be ``% d``.
- Ruby/i18n-js ``%{name}``.
- Python ``str.format``: ``{}``, ``{0}``, ``{name}``, ``{0:>8}``, ``{name!r}``, ``{user.name}``,
  ``{items[0]}``; ICU simple arguments ``{count}``, ``{n, number}``, ``{d, date, short}``.
- ICU complex arguments ``{n, plural, one {# item} other {# items}}`` (``select``,
  ``selectordinal`` alike): the argument counts as one placeholder, written ``{n, plural}``; the
  inner messages are translatable text (their own placeholders count, ``#`` does not).
- Templates: ``{{var}}``, ``{{ user.name }}`` (Mustache, Handlebars, Angular, Jinja) and ``${var}``
  (JavaScript template literals, shell, Java EL).

Left out, because ordinary prose writes the same characters: bare ``$var`` (``$HOME``, but also
"$USD"), ``:name`` (Rails routes, SQL), ``@name@``, a ``{{`` that is Python's escaped brace, and
printf's ``% d``. HTML tags are markup, not placeholders (see ``contract.inline_tags``
and the ``tags`` flag).
"""

from __future__ import annotations

import re
from collections import Counter

_ARGUMENT_WIDTH = r"\*(?:\d+\$)?"  # a width or precision from an argument, itself maybe positional: %1$*2$d
_PRINTF = (
    r"%(?:\d+\$)?"  # a position: %2$s
    r"(?:\([^)\s]*\))?"  # a Python mapping key: %(name)s
    r"[-#0+I]*"  # flags (glibc's I: locale digits)
    rf"(?:{_ARGUMENT_WIDTH}|\d+)?(?:\.(?:{_ARGUMENT_WIDTH}|\d+))?"
    r"(?:<PRI[diouxX](?:8|16|32|64|MAX|PTR|LEAST8|LEAST16|LEAST32|LEAST64|FAST8|FAST16|FAST32|FAST64)>"  # gettext's
    r"|(?:I64|I32|[hlLqjzZtI])*[diouxXeEfFgGcCrsSaAnmp@])"  # <inttypes.h> macros; Windows I64; C's conversions
)
_PRINTF_GROUPED = (  # POSIX's thousands' grouping flag: %'d, %'.2f, %1$'d; only on numbers, so prose's %'s is not one
    r"%(?:\d+\$)?'[-#0+I']*"
    rf"(?:{_ARGUMENT_WIDTH}|\d+)?(?:\.(?:{_ARGUMENT_WIDTH}|\d+))?"
    r"(?:[hlLqjzZt])*[diufFgGeE]"
)
_PERCENT_ESCAPE = r"%%"
_RUBY = r"%\{[A-Za-z_][\w.]*\}"
_TEMPLATE = r"\{\{\s*[A-Za-z_][\w.\-]*\s*\}\}"
_DOLLAR = r"\$\{[A-Za-z_][\w.]*\}"
_ICU_SIMPLE = r"\{\s*[A-Za-z0-9_]+\s*,\s*(?:number|date|time|duration|spellout|ordinal)\s*(?:,[^{}]*)?\}"
_FORMAT = r"\{[A-Za-z0-9_.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"

PLACEHOLDER = re.compile(
    "|".join([_PERCENT_ESCAPE, _PRINTF_GROUPED, _PRINTF, _RUBY, _TEMPLATE, _DOLLAR, _ICU_SIMPLE, _FORMAT])
)
"""One placeholder of the grammar above, or ``%%`` (matched so that it hides no ``%s``; not a placeholder)."""

DIRECTIVE = re.compile(r"%[-_0^#]?[A-Za-z+]")
"""A ``%`` and a letter in a message: a strftime directive (``%H:%M``, ``%a %b %e %Y``) or a tool's own
(GNU ld's ``%B``, ``%P``, ``%v``). Kept from the model in a message, like a placeholder, but not one:
a translator localises a date format (German ``%A, den %d. %B %Y``), so the ``placeholders`` flag
does not count them."""

_ICU_COMPLEX = re.compile(r"\{\s*([A-Za-z0-9_]+)\s*,\s*(plural|selectordinal|select)\s*,")
_ICU_SELECTOR = re.compile(r"\s*(?:offset:\d+\s*)?(=?[\w-]+)\s*\{")
_SPACES = re.compile(r"\s+")


def placeholders(text: str) -> Counter[str]:
    """The placeholders of ``text`` as a multiset (placeholder -> how many times), ``%%`` left out.

    Template placeholders are counted without their inner spaces (``{{ name }}`` is ``{{name}}``),
    an ICU complex argument as ``{arg, kind}`` with its inner messages scanned for their own.
    """
    found: Counter[str] = Counter()
    _scan(text, found)
    return found


def _scan(text: str, found: Counter[str]) -> None:
    position = 0
    while True:
        head = _ICU_COMPLEX.search(text, position)
        stop = head.start() if head is not None else len(text)
        for match in PLACEHOLDER.finditer(text, position, stop):
            raw = match.group(0)
            if raw != "%%":
                found[_SPACES.sub("", raw) if raw.startswith("{{") else raw] += 1
        if head is None:
            return
        found[f"{{{head.group(1)}, {head.group(2)}}}"] += 1
        position = _scan_icu_messages(text, head.end(), found)


def _scan_icu_messages(text: str, position: int, found: Counter[str]) -> int:
    """Scan the ``selector {message}`` pairs of an ICU complex argument; return where it ends.

    Each inner message is translatable text with placeholders of its own; ``#`` and the selectors
    are not placeholders. A construct that does not parse is scanned as ordinary text from there.
    """
    while True:
        selector = _ICU_SELECTOR.match(text, position)
        if selector is None:
            end = text.find("}", position)
            if end >= 0 and not text[position:end].strip():
                return end + 1  # the construct's closing brace
            return position  # not ICU after all: the rest is plain text
        close = _matching_brace(text, selector.end() - 1)
        if close < 0:
            return position
        _scan(text[selector.end() : close], found)
        position = close + 1


def _matching_brace(text: str, opening: int) -> int:
    """The index of the brace closing the one at ``opening`` (-1 if it is never closed)."""
    depth = 0
    for index in range(opening, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


_POSITION = re.compile(r"^%\d+\$")


def placeholder_difference(source: str, translation: str) -> tuple[list[str], list[str]]:
    """The placeholders ``translation`` lacks and those it invented, relative to ``source`` (with repeats).

    printf positions are compared only when both sides use them: a translator may number the
    placeholders of an unnumbered message to reorder them (``%s: %s`` -> ``%2$s : %1$s``).
    """
    expected, found = placeholders(source), placeholders(translation)
    if _numbered(expected) != _numbered(found):
        expected, found = _unnumbered(expected), _unnumbered(found)
    return sorted((expected - found).elements()), sorted((found - expected).elements())


def _numbered(found: Counter[str]) -> bool:
    return any(_POSITION.match(placeholder) for placeholder in found)


def _unnumbered(found: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for placeholder, count in found.items():
        out[_POSITION.sub("%", placeholder)] += count
    return out

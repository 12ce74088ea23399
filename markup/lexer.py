"""The markup of an HTML or XML text, found in one left-to-right pass: each stretch's place, kind and name.

A stretch of markup is a comment (``<!-- -->``), a CDATA section, a declaration (``<!DOCTYPE>``), a
processing instruction (``<? ?>``), or an element's start or end tag, whose quoted attribute values
may hold ``>`` (``<a href="/x?a>b">``). Everything between two stretches is text. A ``<`` that opens
nothing closed is text: a tag whose quote never ends, a ``<`` before a space (``1 < 2``), a ``<?``
with no ``?>``. A comment or CDATA section left open ends at the next ``>`` (as a declaration would),
or is text when none follows. In HTML the content of ``script`` and ``style`` is text, not markup
(``if (a<b)`` opens no tag): the caller names such elements (``raw_text``), and the next stretch after
one's start tag is its end tag.

Every closing mark is looked for with a :class:`~markup.finder.Finder`, so what one search read is
never read again: the whole pass is linear in the text, however many constructs are left open (a
regular expression such as ``<!--.*?-->`` is quadratic on ten thousand unclosed comments).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from typing import NamedTuple

from markup.finder import Finder

_NAME_END = re.compile(r"[\s/>]")
_ATTRIBUTE = re.compile(r"""([^\s/>="']+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>"']+))?""")


class Kind(enum.Enum):
    """What a stretch of markup is."""

    START = "start"  # <name ...> or <name .../>
    END = "end"  # </name>
    COMMENT = "comment"  # <!-- ... -->
    CDATA = "cdata"  # <![CDATA[ ... ]]>
    DECLARATION = "declaration"  # <!DOCTYPE ...>, and an unclosed comment up to the next '>'
    INSTRUCTION = "instruction"  # <?xml ... ?>


class Markup(NamedTuple):
    """One stretch of markup: ``source[start:end]``, its kind, and a tag's element name as written ("" if none)."""

    start: int
    end: int
    kind: Kind
    name: str = ""
    self_closing: bool = False  # a start tag that ends in "/>"


def markup(source: str, raw_text: frozenset[str] = frozenset()) -> Iterator[Markup]:
    """Each stretch of markup in ``source``, in order (the text is what lies between them); linear time.

    ``raw_text``: lower-case names of elements whose content is text (HTML's ``script``, ``style``).
    """
    finder = Finder(source)
    tag_ends: dict[int, int | None] = {}
    position = finder.find("<", 0)
    while position != -1:
        found = _markup_at(source, position, finder, tag_ends)
        if found is None:
            position = finder.find("<", position + 1)
            continue
        yield found
        position = finder.find("<", found.end)
        if found.kind is Kind.START and not found.self_closing and (name := found.name.lower()) in raw_text:
            position = _raw_text_end(source, name, position, finder)


def _raw_text_end(source: str, name: str, position: int, finder: Finder) -> int:
    """Where the content of a raw-text element named ``name`` (lower case) ends: at its ``</name``, or -1 (none)."""
    while position != -1:
        after = position + 2 + len(name)
        if source[position + 1 : position + 2] == "/" and source[position + 2 : after].lower() == name:
            if after == len(source) or _NAME_END.match(source, after):
                return position
        position = finder.find("<", position + 1)
    return -1


def attributes(tag: str) -> dict[str, str]:
    """The attributes of a start tag (``tag`` is its whole text), names lower-cased, values unquoted.

    An attribute without a value is ``""``; a name given twice keeps its first value, as browsers do.
    """
    name_end = _NAME_END.search(tag, 1)
    found: dict[str, str] = {}
    if name_end is None:
        return found
    for match in _ATTRIBUTE.finditer(tag, name_end.start(), len(tag) - 1):
        value = match.group(2) or ""
        if value[:1] in ("'", '"'):
            value = value[1:-1]
        found.setdefault(match.group(1).lower(), value)
    return found


def _markup_at(source: str, start: int, finder: Finder, tag_ends: dict[int, int | None]) -> Markup | None:
    """The markup the ``<`` at ``start`` opens, or ``None`` if it is text."""
    if source.startswith("<!", start):
        for opening, closing, kind in (("<!--", "-->", Kind.COMMENT), ("<![CDATA[", "]]>", Kind.CDATA)):
            if source.startswith(opening, start):
                close = finder.find(closing, start + len(opening))
                if close != -1:
                    return Markup(start, close + len(closing), kind)
        close = finder.find(">", start + 2)  # a doctype (or an unclosed comment up to the next '>')
        return None if close == -1 else Markup(start, close + 1, Kind.DECLARATION)
    if source.startswith("<?", start):
        close = finder.find("?>", start + 2)
        return None if close == -1 else Markup(start, close + 2, Kind.INSTRUCTION)
    is_end = source.startswith("</", start)
    name = start + 2 if is_end else start + 1
    if name >= len(source) or not source[name].isascii() or not source[name].isalpha():
        return None
    after_name = finder.find(_NAME_END, name + 1)
    if after_name == -1 or finder.find(">", after_name) == -1:
        return None
    end = _tag_end(source, after_name, finder, tag_ends)
    if end is None:
        return None
    if is_end:
        return Markup(start, end, Kind.END, source[name:after_name])
    return Markup(start, end, Kind.START, source[name:after_name], source[end - 2] == "/")


def _tag_end(source: str, position: int, finder: Finder, known: dict[int, int | None]) -> int | None:
    """Just past the first ``>`` from ``position`` on that is not inside a quoted attribute value (``None``: none).

    Where a walk ends depends only on where it is, so every position walked is remembered in
    ``known``: a later tag whose walk reaches one stops there, and no stretch is walked twice.
    """
    walked: list[int] = []
    end: int | None = None
    while position not in known:
        walked.append(position)
        mark = finder.first_of((">", '"', "'"), position)
        if mark == -1:
            break
        if source[mark] == ">":
            end = mark + 1
            break
        close = finder.find(source[mark], mark + 1)
        if close == -1:
            break
        position = close + 1
    else:
        end = known[position]
    for step in walked:
        known[step] = end
    return end

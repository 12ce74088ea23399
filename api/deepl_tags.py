"""DeepL's ``tag_handling`` (``xml``, ``html``) on dragoman's placeholder tags (:mod:`contract.inline_tags`).

The markup of a text is swapped for numbered placeholders before the job is queued, as documents'
inline markup is: an element whose content is translated becomes a pair ``<xN>…</xN>``; a
self-closing or void element (``<br>``, ``<img>``), a comment, a processing instruction, a CDATA
section, a stray closing tag, and a whole element whose content must not be translated (named in
``ignore_tags``, or in HTML one with ``translate="no"`` or class ``notranslate``) becomes a unit
``<xN/>``. The worker keeps the placeholders (checked, retried once, else the text between them
translated on its own) and :func:`restore` puts the original markup back, byte for byte.

DeepL's ``splitting_tags``, ``non_splitting_tags``, ``outline_detection`` and ``tag_handling_version``
are accepted and ignored: dragoman translates each text whole, so there is no sentence splitting to steer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from contract.inline_tags import Tag, tokens

TAG_HANDLINGS = ("xml", "html")
"""The ``tag_handling`` values taken."""

_MARKUP = re.compile(
    r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<!(?:[^<>]*)>"
    r"|<(?P<closing>/?)(?P<name>[A-Za-z_][\w:.-]*)(?P<attributes>(?:\s[^<>]*?)?)(?P<unit>/?)>",
    re.DOTALL,
)
_VOID_HTML = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
_NO_TRANSLATE = re.compile(r"""\btranslate\s*=\s*["']?no\b|\bclass\s*=\s*["'][^"']*\bnotranslate\b""", re.IGNORECASE)


@dataclass(slots=True)
class TaggedText:
    """A text with its markup swapped for placeholder tags, and the markup each placeholder stands for."""

    text: str
    markup: dict[str, str] = field(default_factory=dict)

    @property
    def tagged(self) -> bool:
        """Whether any markup was swapped (the job then carries ``inline_tags``)."""
        return bool(self.markup)


@dataclass(slots=True)
class _Open:
    name: str
    number: int
    index: int  # where its placeholder sits in the output pieces


def to_placeholders(text: str, tag_handling: str, ignore_tags: frozenset[str] = frozenset()) -> TaggedText:
    """``text`` with its markup swapped for placeholder tags (see the module's docstring)."""
    html = tag_handling == "html"
    fold = str.lower if html else str
    ignored = frozenset(fold(name) for name in ignore_tags)
    pieces: list[str | Tag] = []
    markup: dict[int, str] = {}
    closing_markup: dict[int, str] = {}
    stack: list[_Open] = []
    position = 0
    skipping: tuple[str, int, int] | None = None  # an ignored element: its name, nesting depth, start

    def unit(raw: str) -> None:
        number = len(markup) + 1
        markup[number] = raw
        pieces.append(Tag("unit", number))

    for match in _MARKUP.finditer(text):
        name = fold(match.group("name")) if match.group("name") else None
        closing, self_closing = bool(match.group("closing")), bool(match.group("unit"))
        if skipping is not None:
            skipped, depth, start = skipping
            if name == skipped and not self_closing:
                depth += -1 if closing else 1
            if depth == 0:
                unit(text[start : match.end()])
                position, skipping = match.end(), None
            else:
                skipping = (skipped, depth, start)
            continue
        if match.start() > position:
            pieces.append(text[position : match.start()])
        position = match.end()
        raw = match.group(0)
        if name is None or self_closing or (html and name in _VOID_HTML):
            unit(raw)
        elif closing:
            if stack and stack[-1].name == name:
                opened = stack.pop()
                closing_markup[opened.number] = raw
                pieces.append(Tag("close", opened.number))
            else:
                unit(raw)  # a closing tag that closes nothing open here
        elif name in ignored or (html and _NO_TRANSLATE.search(match.group("attributes") or "")):
            skipping = (name, 1, match.start())
        else:
            number = len(markup) + 1
            markup[number] = raw
            stack.append(_Open(name, number, len(pieces)))
            pieces.append(Tag("open", number))
    if skipping is not None:  # an ignored element never closed: the rest of the text is its content
        unit(text[skipping[2] :])
    elif position < len(text):
        pieces.append(text[position:])
    for opened in stack:  # opened and never closed: a unit, like a void element
        pieces[opened.index] = Tag("unit", opened.number)
    placeholders: dict[str, str] = {}
    for piece in pieces:
        if isinstance(piece, Tag):
            original = closing_markup[piece.number] if piece.kind == "close" else markup[piece.number]
            placeholders[str(piece)] = original
    return TaggedText("".join(str(piece) for piece in pieces), placeholders)


def restore(translation: str, markup: dict[str, str]) -> str:
    """``translation`` with each placeholder tag swapped back for the markup it stands for.

    A placeholder the source did not have (the model made it up) is dropped.
    """
    if not markup:
        return translation
    return "".join(markup.get(str(piece), "") if isinstance(piece, Tag) else piece for piece in tokens(translation))

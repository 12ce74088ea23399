"""A text's markup swapped for numbered placeholder tags (:mod:`contract.inline_tags`), and put back after.

The model sees ``Click <x1>here</x1> to open <x2/>.``: an element whose content is translated becomes
a pair ``<xN>…</xN>``; a unit ``<xN/>`` stands for what the model never sees: a void or self-closing
element (``<br>``, ``<img/>``), a comment, a processing instruction, a CDATA section, a declaration,
an end tag that closes nothing open, an element left open, and a whole element whose content is not
to be translated (content and all). The job is marked ``inline_tags``: the worker checks that a
translation kept the placeholders (retried once, else the text between them translated on its own),
and :func:`restore` puts the original markup back, byte for byte.

An end tag closes the nearest open element of its name; elements opened inside it and not closed
become units (``A <b>bold <i>open</b> end`` is ``A <x1>bold <x2/>open</x1> end``), so the pairs
always nest as the worker's check wants. An element not to be translated runs to the end tag that
matches it, counting nested ones of the same name, or to the end of the text.

A :class:`Dialect` says how names compare and which elements hold no text: HTML's names ignore case,
its void elements have no end tag, ``script`` and ``style`` hold code (no markup) and are never translated, and
``translate="no"`` or ``class="notranslate"`` keeps an element's content as it is; XML has none of that.
One pass over the lexer's markup (:mod:`markup.lexer`), so linear in the text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from contract.errors import InvalidJobError
from contract.inline_tags import Tag, tokens
from markup.lexer import Kind, Markup, attributes, markup

MAX_PLACEHOLDERS = 9_999
"""Most placeholder tags one text may carry: the worker reads ``<x1>`` to ``<x9999>`` (``contract.inline_tags.TAG``)."""

VOID_ELEMENTS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
"""HTML's elements with no end tag: each is one unit tag."""


class TooMuchMarkupError(InvalidJobError):
    """A text holds more pieces of markup than placeholder tags can number; the message says how to send it."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """How a markup language is read: how element names compare, and which elements hold no translatable text."""

    name: str
    fold_case: bool  # element names compare ignoring case (HTML)
    void: frozenset[str]  # elements with no end tag (compared in the dialect's case)
    raw_text: frozenset[str]  # elements whose content is text, not markup (lower case)
    untranslated: frozenset[str]  # elements whose content is never translated, whatever the caller asks
    translate_attributes: bool  # translate="no" and class="notranslate" keep an element's content as it is


XML = Dialect(
    "xml",
    fold_case=False,
    void=frozenset(),
    raw_text=frozenset(),
    untranslated=frozenset(),
    translate_attributes=False,
)
"""XML: names are case-sensitive, every element may hold text."""

HTML = Dialect(
    "html",
    fold_case=True,
    void=VOID_ELEMENTS,
    raw_text=frozenset({"script", "style"}),
    untranslated=frozenset({"script", "style"}),
    translate_attributes=True,
)
"""HTML: names ignore case, void elements are units, scripts and styles and ``translate="no"`` are kept."""


@dataclass(frozen=True, slots=True)
class TaggedText:
    """A text with its markup swapped for placeholder tags, and the markup each placeholder stands for."""

    text: str
    markup: dict[str, str] = field(default_factory=dict)

    @property
    def tagged(self) -> bool:
        """Whether any markup was swapped (the job then carries ``inline_tags``)."""
        return bool(self.markup)

    def restore(self, translation: str) -> str:
        """``translation`` with each placeholder put back as the markup it stands for (see :func:`restore`)."""
        return restore(translation, self.markup)


def restore(translation: str, markup: dict[str, str]) -> str:
    """``translation`` with each placeholder tag swapped back for the markup it stands for.

    A placeholder the source did not have (the model made it up) is dropped; the worker's tag check
    already refused a translation that lost or invented tags, so this only guards its fallback.
    """
    if not markup:
        return translation
    return "".join(markup.get(str(piece), "") if isinstance(piece, Tag) else piece for piece in tokens(translation))


class _Open:
    """An element whose start tag was seen: a pair once its end tag comes, else a unit."""

    __slots__ = ("closed", "name", "number", "raw")

    def __init__(self, name: str, number: int, raw: str) -> None:
        self.name = name
        self.number = number
        self.raw = raw
        self.closed = False


def to_placeholders(text: str, dialect: Dialect, untranslated: frozenset[str] = frozenset()) -> TaggedText:
    """``text`` with its markup swapped for placeholder tags (see the module's docstring); linear time.

    ``untranslated``: names of elements kept whole as one unit each (DeepL's ``ignore_tags``), in addition
    to the dialect's own. Raises :class:`TooMuchMarkupError` past :data:`MAX_PLACEHOLDERS` tags.
    """
    fold: Callable[[str], str] = str.lower if dialect.fold_case else str
    kept = frozenset(fold(name) for name in untranslated) | dialect.untranslated
    pieces: list[str | Tag | _Open] = []
    markup_of: dict[str, str] = {}
    stack: list[_Open] = []
    open_count: dict[str, int] = {}  # how many elements of each name are on the stack: an end tag's match in O(1)
    number = 0
    position = 0
    stretches = markup(text, dialect.raw_text)

    def numbered() -> int:
        nonlocal number
        number += 1
        if number > MAX_PLACEHOLDERS:
            raise TooMuchMarkupError(
                f"the text holds more than {MAX_PLACEHOLDERS:,} tags, comments and other pieces of markup; "
                "send it in smaller parts, or without tag handling"
            )
        return number

    def unit(raw: str) -> None:
        tag = Tag("unit", numbered())
        markup_of[str(tag)] = raw
        pieces.append(tag)

    for stretch in stretches:
        if stretch.start > position:
            pieces.append(text[position : stretch.start])
        position = stretch.end
        raw = text[stretch.start : stretch.end]
        name = fold(stretch.name)
        if stretch.kind is Kind.END:
            if open_count.get(name):
                element = _close(stack, open_count, name)
                closing = Tag("close", element.number)
                markup_of[str(closing)] = raw
                pieces.append(closing)
            else:
                unit(raw)  # an end tag that closes nothing open here
        elif stretch.kind is not Kind.START or stretch.self_closing or name in dialect.void:
            unit(raw)
        elif name in kept or (dialect.translate_attributes and _says_no(raw)):
            position = _element_end(stretches, name, fold, len(text))
            unit(text[stretch.start : position])
        else:
            element = _Open(name, numbered(), raw)
            stack.append(element)
            open_count[name] = open_count.get(name, 0) + 1
            pieces.append(element)
    if position < len(text):
        pieces.append(text[position:])
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, _Open):  # a pair if its end tag came, else a unit like a void element
            piece_tag = Tag("open" if piece.closed else "unit", piece.number)
            markup_of[str(piece_tag)] = piece.raw
            out.append(str(piece_tag))
        else:
            out.append(str(piece))
    return TaggedText("".join(out), markup_of)


def _close(stack: list[_Open], open_count: dict[str, int], name: str) -> _Open:
    """Pop the stack down to the nearest open element named ``name`` and mark it closed; that element.

    The elements above it were left open inside it: they stay units.
    """
    while True:
        element = stack.pop()
        open_count[element.name] -= 1
        if element.name == name:
            element.closed = True
            return element


def _element_end(stretches: Iterator[Markup], name: str, fold: Callable[[str], str], text_end: int) -> int:
    """Where the element named ``name`` whose start tag was just read ends: past its matching end tag.

    Nested elements of the same name are counted; an element never closed runs to ``text_end``.
    """
    depth = 1
    for stretch in stretches:
        if stretch.kind is Kind.START and not stretch.self_closing and fold(stretch.name) == name:
            depth += 1
        elif stretch.kind is Kind.END and fold(stretch.name) == name:
            depth -= 1
            if depth == 0:
                return stretch.end
    return text_end


def _says_no(start_tag: str) -> bool:
    """Whether an HTML start tag keeps its element's content as it is: ``translate="no"`` or class ``notranslate``."""
    if "translate" not in start_tag.lower():  # most tags: no attribute to read
        return False
    found = attributes(start_tag)
    return found.get("translate", "").strip().lower() == "no" or "notranslate" in found.get("class", "").lower().split()

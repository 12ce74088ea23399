"""HTML: each block's text is one or more whole sentences, its inline elements placeholder tags.

The markup is found by a linear lexer (:func:`_markup`; the standard library's ``html.parser``
reads to the end of the document at every unclosed comment, minutes for a hostile 200 kB file).
On top of it: inline elements (``a``, ``b``, ``em``, ``span``…) stay inside the sentence as
``<xN>…</xN>``; ``br``, images without translatable attributes, code (``code``, ``kbd``, ``samp``, ``var``, ``tt``) and
``translate="no"`` / ``class="notranslate"`` spans are unit tags the model never sees; any other
element ends the block. ``script``, ``style``, ``pre``, ``textarea`` and ``translate="no"``
blocks are kept as they are. The values of ``alt``, ``title``, ``placeholder``, ``aria-label``
and ``<meta name="description" content>`` are segments of their own; ``lang`` attributes are
set to the target language. Text reaches the model unescaped (``&amp;`` as ``&``) and comes back
escaped.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterator

from markup.finder import Finder
from orchestrator.segmenting.parts import ATTACHED_MARK, Code, CodeKind, LangAttribute, Segment, attached_place
from orchestrator.segmenting.skeleton import Skeleton

_NAME_END = re.compile(r"[\s/>]")

_TAG_NAME = re.compile(r"</?([a-zA-Z][^\s/>]*)")
# Elements whose content is code, data or not shown: kept as they are.
_UNTRANSLATED = frozenset({"script", "style", "pre", "textarea", "template", "svg", "math"})
# Inline elements whose content is code: a unit tag, content and all.
_INLINE_CODE = frozenset({"code", "kbd", "samp", "tt", "var"})
_INLINE = frozenset(
    {
        "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "data", "del", "dfn", "em", "font", "i",
        "ins", "label", "mark", "nobr", "q", "s", "small", "span", "strike", "strong", "sub", "sup", "time",
        "u",
    }
)  # fmt: skip
_INLINE_VOID = frozenset({"br", "wbr", "img"})
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
_TRANSLATED_ATTRIBUTES = frozenset({"alt", "title", "placeholder", "aria-label"})
_ATTRIBUTE = re.compile(r"""([^\s/>="']+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>"']+))?""")


def split_html(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """Cut an HTML document into markup, whole-sentence segments and attribute segments (linear time)."""
    walker = _Walker(skeleton, max_chars, detach=ATTACHED_MARK not in source)
    finder = Finder(source)
    position = 0
    for start, end in _markup(source, finder):
        walker.text(source[position:start])
        walker.tag(source[start:end])
        position = end
    walker.text(source[position:])
    walker.flush()


class _Walker:
    """The state of one pass: the open kept-as-is elements and the block being gathered."""

    def __init__(self, skeleton: Skeleton, max_chars: int, *, detach: bool) -> None:
        self.skeleton = skeleton
        self.detach = detach  # detached segments need a mark the document itself does not hold
        self.max_chars = max_chars
        self.kept: list[str] = []  # open elements whose content is kept as it is
        self.kept_count: Counter[str] = Counter()
        self.block: list[str | Code] = []
        self.opaque: list[str] | None = None  # raw of an inline code element being gathered
        self.opaque_name = ""
        self.opaque_depth = 0

    def text(self, raw: str) -> None:
        if not raw:
            return
        if self.opaque is not None:
            self.opaque.append(raw)
        elif self.kept:
            self.skeleton.literal(raw)
        else:
            self.block.append(raw)

    def tag(self, tag: str) -> None:
        name_match = _TAG_NAME.match(tag)
        if self.opaque is not None:
            self._opaque_tag(tag, name_match.group(1).lower() if name_match else "")
            return
        if self.kept:
            self.skeleton.literal(tag)
            if name_match:
                self._track_kept(tag, name_match.group(1).lower())
            return
        if not name_match:  # a comment, doctype or processing instruction
            self._unit_or_literal(tag)
            return
        name = name_match.group(1).lower()
        closing = tag.startswith("</")
        empty = tag.endswith("/>")  # XHTML's <a id="p5"/>: an element without content, never one to pair
        attributes = _Attributes(tag)
        no_translate = not closing and attributes.no_translate()
        if not closing and (name in _INLINE_CODE or (no_translate and name in _INLINE)) and not empty:
            self.opaque, self.opaque_name, self.opaque_depth = [tag], name, 1
            return
        translated = attributes.translated()
        inline = name in _INLINE or name in _INLINE_VOID or (empty and name in _INLINE_CODE)
        if inline and (self.detach or not translated):
            raw = self._detach(tag, attributes, translated) if translated else tag
            kind: CodeKind = (
                "break" if name == "br" else "unit" if name in _INLINE_VOID or empty else "close" if closing else "open"
            )
            self.block.append(Code(raw, kind, name))
            return
        self.flush()
        self._tag_with_attributes(tag, attributes)
        local = name.rpartition(":")[2]  # XHTML's prefixed svg:svg, m:math
        if not closing and (local in _UNTRANSLATED or no_translate) and name not in _VOID and not empty:
            self._track_kept(tag, name)

    def _detach(self, tag: str, attributes: _Attributes, translated: list[str]) -> str:
        """``tag`` with each translated attribute value replaced by the place of its own (detached) segment.

        An image's ``alt`` or a link's ``title`` is translated on its own, while the tag stays a
        placeholder inside its sentence.
        """
        out: list[str] = []
        position = 0
        for start, end in sorted(attributes.spans[name] for name in translated):
            value = tag[start:end]
            text = value.strip()
            index = self.skeleton.add_detached(Segment(text=html.unescape(text), raw=text, escape="attr"))
            if index is None:  # nothing to translate (no value, or no letter in it): kept as it is
                continue
            lead = start + len(value) - len(value.lstrip())
            out += [tag[position:lead], attached_place(index)]
            position = lead + len(text)
        out.append(tag[position:])
        return "".join(out)

    def _unit_or_literal(self, tag: str) -> None:
        if self.block:
            self.block.append(Code(tag, "unit"))
        else:
            self.skeleton.literal(tag)

    def _opaque_tag(self, tag: str, name: str) -> None:
        assert self.opaque is not None
        self.opaque.append(tag)
        if name == self.opaque_name:
            self.opaque_depth += -1 if tag.startswith("</") else (0 if tag.endswith("/>") else 1)
        if self.opaque_depth == 0:
            self.block.append(Code("".join(self.opaque), "unit", name, worded=True))
            self.opaque = None

    def _track_kept(self, tag: str, name: str) -> None:
        if tag.startswith("</"):
            if self.kept_count[name]:  # close it and whatever was left open inside it
                while (closed := self.kept.pop()) != name:
                    self.kept_count[closed] -= 1
                self.kept_count[name] -= 1
        elif name not in _VOID and not tag.endswith("/>"):
            self.kept.append(name)
            self.kept_count[name] += 1

    def _tag_with_attributes(self, tag: str, attributes: _Attributes) -> None:
        """The tag as literal markup, its translatable attribute values as segments, ``lang`` values marked."""
        position = 0
        translated = set(attributes.translated())
        for name, (start, end) in sorted(attributes.spans.items(), key=lambda item: item[1]):
            value = tag[start:end]
            if name in ("lang", "xml:lang") and value.strip():
                self.skeleton.literal(tag[position:start])
                self.skeleton.add_lang(LangAttribute(value))
                position = end
            elif name in translated:
                self.skeleton.literal(tag[position:start])
                self.skeleton.prose(value, self.max_chars, escape="attr")
                position = end
        self.skeleton.literal(tag[position:])

    def flush(self) -> None:
        """End the block being gathered: its sentences become segments."""
        if self.opaque is not None:  # an inline code element never closed: its markup stays as it is
            self.block.append(Code("".join(self.opaque), "unit", self.opaque_name, worded=True))
            self.opaque = None
        if self.block:
            self.skeleton.block(self.block, self.max_chars, escape="html")
            self.block = []


class _Attributes:
    """A start tag's attributes: each lower-case name with the span of its value (quotes excluded)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.spans: dict[str, tuple[int, int]] = {}
        name_end = _NAME_END.search(tag, 1)
        if name_end is None or tag.startswith("</"):
            return
        for match in _ATTRIBUTE.finditer(tag, name_end.start(), len(tag) - 1):
            value = match.group(2)
            if value is None:
                span = (match.end(), match.end())
            elif value[0] in "\"'":
                span = (match.start(2) + 1, match.end(2) - 1)
            else:
                span = (match.start(2), match.end(2))
            self.spans.setdefault(match.group(1).lower(), span)

    def value(self, name: str) -> str | None:
        """The value of attribute ``name``, as written (``None``: absent)."""
        span = self.spans.get(name)
        return None if span is None else self.tag[span[0] : span[1]]

    def translated(self) -> list[str]:
        """The names of the attributes whose values are translated."""
        return [name for name in self.spans if name in _TRANSLATED_ATTRIBUTES or self._is_description(name)]

    def no_translate(self) -> bool:
        """``translate="no"`` or ``class="… notranslate …"``."""
        translate = (self.value("translate") or "").strip().lower()
        return translate == "no" or "notranslate" in (self.value("class") or "").split()

    def _is_description(self, name: str) -> bool:
        """The ``content`` of ``<meta name="description">`` (and its Open Graph and Twitter twins)."""
        if name != "content" or self.tag[1:5].lower() != "meta":
            return False
        kind = (self.value("name") or self.value("property") or "").strip().lower()
        return kind in ("description", "og:description", "twitter:description", "og:title", "twitter:title")


def _markup(source: str, finder: Finder) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each stretch of markup: comments, CDATA, doctypes, processing instructions, tags.

    A ``<`` that opens nothing closed (an unclosed comment, a tag whose quote never ends) is text.
    """
    tag_ends: dict[int, int | None] = {}
    position = finder.find("<", 0)
    while position != -1:
        end = _markup_end(source, position, finder, tag_ends)
        if end is None:
            position = finder.find("<", position + 1)
        else:
            yield position, end
            position = finder.find("<", end)


def _markup_end(source: str, start: int, finder: Finder, tag_ends: dict[int, int | None]) -> int | None:
    """Where the markup opened by the ``<`` at ``start`` ends (just past its ``>``), or ``None`` if it is text."""
    if source.startswith("<!", start):
        for opening, closing in (("<!--", "-->"), ("<![CDATA[", "]]>")):
            if source.startswith(opening, start):
                close = finder.find(closing, start + len(opening))
                if close != -1:
                    return close + len(closing)
        close = finder.find(">", start + 2)  # a doctype (or an unclosed comment up to the next '>')
        return None if close == -1 else close + 1
    if source.startswith("<?", start):
        close = finder.find("?>", start + 2)
        return None if close == -1 else close + 2
    name = start + 2 if source.startswith("</", start) else start + 1
    if name >= len(source) or not source[name].isascii() or not source[name].isalpha():
        return None
    after_name = finder.find(_NAME_END, name + 1)
    if after_name == -1 or finder.find(">", after_name) == -1:
        return None
    return _tag_end(source, after_name, finder, tag_ends)


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

"""HTML: text nodes are translated; tags, attributes, comments and entities around them are kept.

Text inside ``script``, ``style``, ``pre``, ``code`` and similar elements is never translated.
Segments reach the model unescaped (``&amp;`` as ``&``) and come back escaped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from orchestrator.segmenting.finder import Finder
from orchestrator.segmenting.skeleton import Skeleton

_NAME_END = re.compile(r"[\s/>]")

_TAG_NAME = re.compile(r"</?([a-zA-Z][^\s/>]*)")
# Elements whose text is code, data or not shown: kept as they are.
_UNTRANSLATED = frozenset(
    {"script", "style", "pre", "code", "kbd", "samp", "var", "textarea", "template", "svg", "math", "head"}
)
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


def split_html(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """Cut an HTML document into literal markup and text-node segments (in time linear in its length)."""
    inside: list[str] = []  # open untranslated elements
    open_count: Counter[str] = Counter()  # how many of each are in ``inside`` (a close costs no scan of it)
    finder = Finder(source)
    position = 0
    for start, end in _markup(source, finder):
        _text(skeleton, source[position:start], max_chars, translate=not inside)
        tag = source[start:end]
        skeleton.literal(tag)
        position = end
        name_match = _TAG_NAME.match(tag)
        if not name_match:
            continue
        name = name_match.group(1).lower()
        if tag.startswith("</"):
            if open_count[name]:  # close it and whatever was left open inside it
                while (closed := inside.pop()) != name:
                    open_count[closed] -= 1
                open_count[name] -= 1
        elif name in _UNTRANSLATED and name not in _VOID and not tag.endswith("/>"):
            inside.append(name)
            open_count[name] += 1
    _text(skeleton, source[position:], max_chars, translate=not inside)


def _markup(source: str, finder: Finder) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each piece of markup: comments, CDATA, doctypes, processing instructions, tags.

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


def _text(skeleton: Skeleton, raw: str, max_chars: int, *, translate: bool) -> None:
    if translate:
        skeleton.prose(raw, max_chars, escape="html")
    else:
        skeleton.literal(raw)

"""HTML: text nodes are translated; tags, attributes, comments and entities around them are kept.

Text inside ``script``, ``style``, ``pre``, ``code`` and similar elements is never translated.
Segments reach the model unescaped (``&amp;`` as ``&``) and come back escaped.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.skeleton import Skeleton

_MARKUP = re.compile(
    r"<!--.*?-->"  # comment
    r"|<!\[CDATA\[.*?\]\]>"
    r"|<![^>]*>"  # doctype
    r"|<\?.*?\?>"  # processing instruction
    r"|</?[a-zA-Z][^\s/>]*(?:[^>\"']|\"[^\"]*\"|'[^']*')*>",  # tag; quoted attributes may hold '>'
    re.DOTALL,
)
_TAG_NAME = re.compile(r"</?([a-zA-Z][^\s/>]*)")
# Elements whose text is code, data or not shown: kept as they are.
_UNTRANSLATED = frozenset(
    {"script", "style", "pre", "code", "kbd", "samp", "var", "textarea", "template", "svg", "math", "head"}
)
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


def split_html(source: str, max_chars: int) -> Skeleton:
    """Cut an HTML document into literal markup and text-node segments."""
    skeleton = Skeleton()
    inside: list[str] = []  # open untranslated elements
    position = 0
    for match in _MARKUP.finditer(source):
        _text(skeleton, source[position : match.start()], max_chars, translate=not inside)
        tag = match.group(0)
        skeleton.literal(tag)
        position = match.end()
        name_match = _TAG_NAME.match(tag)
        if not name_match:
            continue
        name = name_match.group(1).lower()
        if tag.startswith("</"):
            if name in inside:
                del inside[len(inside) - 1 - inside[::-1].index(name) :]
        elif name in _UNTRANSLATED and name not in _VOID and not tag.endswith("/>"):
            inside.append(name)
    _text(skeleton, source[position:], max_chars, translate=not inside)
    return skeleton


def _text(skeleton: Skeleton, raw: str, max_chars: int, *, translate: bool) -> None:
    if translate:
        skeleton.prose(raw, max_chars, escape="html")
    else:
        skeleton.literal(raw)

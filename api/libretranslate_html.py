"""LibreTranslate's ``format: html``: an HTML fragment's markup carried through the model as placeholder tags.

A text sent with ``format=html`` carries markup (``Click <a href="/x">here</a>.``). The model sees
the numbered tags documents use (:mod:`contract.inline_tags`: ``Click <x1>here</x1>.``), the job is
marked ``inline_tags`` (the worker checks the tags, retries once, else translates between them),
and the markup is put back around the translation. An element whose content is never translated
(``script``, ``style``, ``code``, ``translate="no"``...), a void element (``<br>``), a comment and
an element left unclosed become unit tags (``<x2/>``): the model never sees their content.

The document splitter (``orchestrator.segmenting``) does this for whole files; the API may not
import the orchestrator, and a LibreTranslate text is one fragment (no sentence cutting, no
skeleton), so this is the small fragment-sized form of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contract.inline_tags import Tag, tokens

_MARKUP = re.compile(
    r"<!--.*?(?:-->|\Z)"  # a comment (an unterminated one runs to the end)
    r"|<![^>]*>"  # a doctype or CDATA-like declaration
    r"|<\?[^>]*>"  # a processing instruction
    r"|</?[A-Za-z][^\s/>]*(?:[^>\"']|\"[^\"]*\"|'[^']*')*>",  # an element's start or end tag
    re.DOTALL,
)
_NAME = re.compile(r"</?([A-Za-z][^\s/>]*)")
_NO_TRANSLATE = re.compile(r"""\stranslate\s*=\s*["']?no\b""", re.IGNORECASE)

VOID_ELEMENTS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
"""Elements with no end tag: each is one unit tag."""

OPAQUE_ELEMENTS = frozenset({"script", "style", "code", "kbd", "samp", "var", "pre", "textarea", "svg", "math"})
"""Elements whose whole content is kept as written (code, markup of another language): one unit tag each."""


@dataclass(frozen=True, slots=True)
class TaggedHtml:
    """An HTML fragment as the text the model sees (``text``) and the markup each placeholder tag stands for."""

    text: str
    markup: dict[str, str]

    def restore(self, translation: str) -> str:
        """``translation`` with its placeholder tags replaced by the markup they stand for.

        A tag the fragment did not have (the model invented it) is dropped; the worker's tag check
        already refused a translation that lost or invented tags, so this only guards a fallback.
        """
        out: list[str] = []
        for token in tokens(translation):
            out.append(self.markup.get(str(token), "") if isinstance(token, Tag) else token)
        return "".join(out)


class _Open:
    """An element start tag waiting for its end tag (``closed``: it found one and is a paired tag)."""

    def __init__(self, name: str, number: int, markup: str) -> None:
        self.name = name
        self.number = number
        self.markup = markup
        self.closed = False


def tag_html(fragment: str) -> TaggedHtml:
    """``fragment``'s markup replaced by numbered placeholder tags (see the module's docstring)."""
    parts: list[str | _Open | Tag] = []
    markup: dict[str, str] = {}
    stack: list[_Open] = []
    number = 0
    position = 0
    while (match := _MARKUP.search(fragment, position)) is not None:
        if match.start() > position:
            parts.append(fragment[position : match.start()])
        raw = match.group(0)
        position = match.end()
        name_match = _NAME.match(raw)
        name = name_match.group(1).lower() if name_match else ""
        if name and raw.startswith("</"):
            opened = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].name == name), None)
            if opened is not None:
                element = stack[opened]
                del stack[opened:]  # elements left open inside it become unit tags
                element.closed = True
                closing = Tag("close", element.number)
                markup[str(closing)] = raw
                parts.append(closing)
                continue
        elif name and not raw.endswith("/>") and name not in VOID_ELEMENTS:
            if name in OPAQUE_ELEMENTS or _NO_TRANSLATE.search(raw):
                end = re.compile(rf"</{re.escape(name)}\s*>", re.IGNORECASE).search(fragment, position)
                position = end.end() if end is not None else len(fragment)
                raw = raw + fragment[match.end() : position]
            else:
                number += 1
                element = _Open(name, number, raw)
                stack.append(element)
                parts.append(element)
                continue
        number += 1
        unit = Tag("unit", number)
        markup[str(unit)] = raw
        parts.append(unit)
    if position < len(fragment):
        parts.append(fragment[position:])
    text: list[str] = []
    for part in parts:
        if isinstance(part, _Open):
            tag = Tag("open" if part.closed else "unit", part.number)
            markup[str(tag)] = part.markup
            text.append(str(tag))
        else:
            text.append(str(part))
    return TaggedHtml("".join(text), markup)

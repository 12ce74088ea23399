"""Numbered placeholder tags that carry a document's inline markup through the model.

A document segment is a whole sentence whose inline elements (a link, bold text, a code span)
are replaced by tags the model is asked to keep: ``Click <x1>here</x1> to open <x2/>.`` A paired
tag ``<xN>…</xN>`` stands for an element whose content is translated (the link text), a unit tag
``<xN/>`` for something the model never sees (a code span, a URL, an image, a ``translate="no"``
span). The orchestrator builds the tags when it splits a document and puts the markup back when
it assembles it; the worker checks that a translation kept them (:func:`tag_problem`), retries
once, and otherwise translates the text between the tags on its own (:func:`text_runs`).

Both sides need the same grammar, so it lives here at the bottom.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

TAG = re.compile(r"<(/?)x([1-9][0-9]{0,3})(/?)>")
"""One placeholder tag: ``<x3>``, ``</x3>`` or ``<x3/>``."""

TagKind = Literal["open", "close", "unit"]


@dataclass(frozen=True, slots=True)
class Tag:
    """A placeholder tag as it appears in a text."""

    kind: TagKind
    number: int

    def __str__(self) -> str:
        if self.kind == "open":
            return f"<x{self.number}>"
        if self.kind == "close":
            return f"</x{self.number}>"
        return f"<x{self.number}/>"


def tokens(text: str) -> list[str | Tag]:
    """``text`` as text runs and tags, in order (a ``<x1/ >`` lookalike that is not a tag stays text)."""
    out: list[str | Tag] = []
    position = 0
    for match in TAG.finditer(text):
        closing, number, unit = match.group(1), int(match.group(2)), match.group(3)
        if closing and unit:
            continue  # "</x1/>" is no tag
        if match.start() > position:
            out.append(text[position : match.start()])
        out.append(Tag("close" if closing else "unit" if unit else "open", number))
        position = match.end()
    if position < len(text):
        out.append(text[position:])
    return out


def has_tags(text: str) -> bool:
    """Whether ``text`` holds any placeholder tag."""
    return any(isinstance(token, Tag) for token in tokens(text))


def tag_signature(text: str) -> list[Tag]:
    """The tags of ``text`` in order."""
    return [token for token in tokens(text) if isinstance(token, Tag)]


def tag_problem(source: str, translation: str) -> str | None:
    """Why ``translation`` does not keep the tags of ``source`` (``None``: it does).

    Every tag of the source must appear exactly once, no other tag may appear, and paired tags
    must nest properly (``<x1>a <x2>b</x2></x1>``). Their order may change: languages order words
    differently.
    """
    expected = Counter(tag_signature(source))
    found = tag_signature(translation)
    counted = Counter(found)
    if counted != expected:
        parts = []
        missing = [str(t) for t in sorted(expected, key=_order) if counted[t] < expected[t] and not counted[t]]
        repeated = [f"{t} ({counted[t]}×)" for t in sorted(counted, key=_order) if counted[t] > max(1, expected[t])]
        extra = [str(t) for t in sorted(counted, key=_order) if not expected[t]]
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        if repeated:
            parts.append(f"repeated {', '.join(repeated)}")
        return "placeholder tags changed: " + "; ".join(parts)
    open_tags: list[int] = []
    for tag in found:
        if tag.kind == "open":
            open_tags.append(tag.number)
        elif tag.kind == "close":
            if not open_tags or open_tags[-1] != tag.number:
                return f"placeholder tags out of order: {tag} does not close the innermost open tag"
            open_tags.pop()
    return None


_KIND_ORDER = {"open": 0, "close": 1, "unit": 2}


def _order(tag: Tag) -> tuple[int, int]:
    return (tag.number, _KIND_ORDER[tag.kind])


def text_runs(text: str) -> list[str | Tag]:
    """The same as :func:`tokens`: the text runs a fallback translates one by one, the tags kept as they are."""
    return tokens(text)


def strip_tags(text: str) -> str:
    """``text`` without its placeholder tags (a previous segment given as context, a report's excerpt)."""
    return "".join(token for token in tokens(text) if isinstance(token, str))

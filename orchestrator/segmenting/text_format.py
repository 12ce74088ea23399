"""Plain text: a paragraph is the unit, its hard-wrapped lines rejoined for the model and re-wrapped after.

Paragraphs are separated by blank lines. Inside one, a line that fills most of the paragraph's
width (at least 60% of its longest line, the longest being 40 characters or more) continues on
the next line unless that one starts a list item or is indented differently: those lines are
one block of prose, the model sees them as one line, and the translation is wrapped again at
the longest line's width with the continuation lines' indentation. Short lines (an address, a
poem, a list) stay lines.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.parts import Code, Wrap
from orchestrator.segmenting.skeleton import Skeleton

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_LIST_ITEM = re.compile(r"\s*(?:[-*+•]|\d{1,3}[.)])\s")
_MIN_WRAP_WIDTH = 40
_FILL = 0.6


def split_text(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """Blank lines and line ends literal; each paragraph (or run of hard-wrapped lines) one block."""
    lines = [m.group(0) for m in _LINE.finditer(source) if m.group(0)]
    paragraph: list[str] = []
    for line in lines:
        if line.strip():
            paragraph.append(line)
            continue
        _paragraph(skeleton, paragraph, max_chars)
        paragraph = []
        skeleton.literal(line)
    _paragraph(skeleton, paragraph, max_chars)


def _paragraph(skeleton: Skeleton, lines: list[str], max_chars: int) -> None:
    if not lines:
        return
    bodies = [line.rstrip("\r\n") for line in lines]
    width = max(len(body.rstrip()) for body in bodies)
    wrapped = width >= _MIN_WRAP_WIDTH
    start = 0
    for number in range(1, len(lines) + 1):
        joins = (
            number < len(lines)
            and wrapped
            and len(bodies[number - 1].rstrip()) >= _FILL * width
            and not _LIST_ITEM.match(bodies[number])
            and (number - 1 == start or _indent(bodies[number]) == _indent(bodies[number - 1]))
        )
        if not joins:
            _lines(skeleton, lines[start:number], bodies[start:number], width, max_chars)
            start = number


def _indent(body: str) -> str:
    return body[: len(body) - len(body.lstrip())]


def _lines(skeleton: Skeleton, lines: list[str], bodies: list[str], width: int, max_chars: int) -> None:
    """Lines that read as one: indentation and line ends literal, the text between one block."""
    first = bodies[0]
    indent = first[: len(first) - len(first.lstrip())]
    skeleton.literal(indent)
    tokens: list[str | Code] = []
    for number, body in enumerate(bodies):
        text = body.strip()
        if number:
            previous = bodies[number - 1]
            gap = (
                previous[len(previous.rstrip()) :]
                + lines[number - 1][len(previous) :]
                + body[: len(body) - len(body.lstrip())]
            )
            tokens.append(Code(gap, "space"))
        tokens.append(text)
    if len(lines) > 1:
        continuation = bodies[1][: len(bodies[1]) - len(bodies[1].lstrip())]
        newline = lines[0][len(bodies[0]) :]
        skeleton.block(tokens, max_chars, wrap=Wrap(width, len(indent), continuation, newline))
    else:
        skeleton.block(tokens, max_chars)
    last = bodies[-1]
    skeleton.literal(last[len(last.rstrip()) :] + lines[-1][len(last) :])

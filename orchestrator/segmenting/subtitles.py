"""Subtitles (SubRip ``.srt`` and WebVTT ``.vtt``): each cue's text is one block, numbering and timings kept.

A file is blocks separated by blank lines. A block with a timing line (``-->``) is a cue: the
lines up to and including the timing line (number, identifier, timing and settings) stay as
they are; the text lines after it are one block of prose, its lines rejoined for the model and
the translation wrapped again at the cue's longest line (at least :data:`MIN_LINE`
characters), so a translated cue keeps to the line length its author chose. Styling tags
(``<i>``, ``<b>``, ``<u>``, ``<font>``, WebVTT's ``<c.x>``, ``<v Speaker>``, ``<lang>``) are
placeholder tags; timestamps inside a cue and SSA overrides (``{\\an8}``) are units. WebVTT's
header, ``NOTE``, ``STYLE`` and ``REGION`` blocks are kept as they are.
"""

from __future__ import annotations

import re

from contract.errors import InvalidJobError
from orchestrator.segmenting.parts import Code, Wrap, tokens_between
from orchestrator.segmenting.skeleton import Skeleton

MIN_LINE = 42
"""Narrowest wrap width for a translated cue: the common subtitle guideline of 42 characters a line
(a cue of short lines would otherwise wrap its translation at every other word)."""

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_CUE_TAG = re.compile(r"<(/?)([a-zA-Z]+)[^>\n]*>|<\d[\d:.]*>|\{\\[^}\n]*\}")


def split_srt(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """A SubRip file: cues of a number, a timing line and text."""
    if not _split_cues(source, max_chars, skeleton, vtt=False):
        raise InvalidJobError("this is not a SubRip (.srt) file: no cue with a timing line ('00:00:01,000 --> ...')")


def split_vtt(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """A WebVTT file: the ``WEBVTT`` header, then cues and NOTE/STYLE/REGION blocks."""
    if not source.lstrip("\ufeff").startswith("WEBVTT"):
        raise InvalidJobError("this is not a WebVTT (.vtt) file: its first line must start with WEBVTT")
    _split_cues(source, max_chars, skeleton, vtt=True)


def _split_cues(source: str, max_chars: int, skeleton: Skeleton, *, vtt: bool) -> int:
    """Cut the blocks; return how many cues were found."""
    lines = [m.group(0) for m in _LINE.finditer(source) if m.group(0)]
    cues = 0
    block: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            cues += _block(skeleton, block, max_chars, vtt=vtt)
            block = []
        skeleton.literal(line)
    return cues


def _block(skeleton: Skeleton, block: list[str], max_chars: int, *, vtt: bool) -> int:
    """One block: a cue's text as prose, anything else kept. Returns 1 for a cue, 0 otherwise."""
    timing = next((i for i, line in enumerate(block) if "-->" in line), None)
    first_word = block[0].split(maxsplit=1)[0] if block[0].split() else ""
    if timing is None or (vtt and first_word in ("NOTE", "STYLE", "REGION", "WEBVTT")):
        for line in block:
            skeleton.literal(line)
        return 0
    for line in block[: timing + 1]:
        skeleton.literal(line)
    text = block[timing + 1 :]
    if text:
        _cue_text(skeleton, text, max_chars)
    return 1


def _cue_text(skeleton: Skeleton, lines: list[str], max_chars: int) -> None:
    bodies = [line.rstrip("\r\n") for line in lines]
    tokens: list[str | Code] = []
    for number, body in enumerate(bodies):
        if number:
            tokens.append(Code(lines[number - 1][len(bodies[number - 1]) :], "space"))
        tokens.extend(_cue_line(body))
    width = max(MIN_LINE, max(len(_CUE_TAG.sub("", body)) for body in bodies))
    newline = lines[0][len(bodies[0]) :] or "\n"
    skeleton.block(tokens, max_chars, wrap=Wrap(width, 0, "", newline, always=True))
    skeleton.literal(lines[-1][len(bodies[-1]) :])


def _cue_line(text: str) -> list[str | Code]:
    """A line of cue text as text runs and styling codes."""
    return tokens_between(text, _CUE_TAG, _cue_code)


def _cue_code(match: re.Match[str]) -> Code:
    """A styling tag opens or closes a pair; a timestamp or an SSA override is a unit."""
    name = match.group(2)
    if name is None:
        return Code(match.group(0), "unit")
    return Code(match.group(0), "close" if match.group(1) else "open", name.lower())

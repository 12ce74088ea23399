"""A block of prose with inline markup, cut into whole-sentence segments that carry placeholder tags.

A splitter hands over a block (an HTML paragraph, a Markdown paragraph or table cell, a
subtitle cue) as text runs and :class:`Code` tokens. The block's text, with the markup left out,
is cut at sentence ends like any prose (:func:`contract.sentences.cut_prose`); each sentence
becomes one segment whose markup is numbered tags (``Click <x1>here</x1>.``). Markup between two
sentences stays literal; an element that opens in one sentence and closes in the next becomes a
unit tag in each, so every segment's tags pair up on their own.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import replace as dataclass_replace

from contract import inline_tags
from contract.sentences import cut_prose
from markup.protected_spans import protected_spans
from orchestrator.segmenting.parts import Code, Escape, Segment, Wrap

_HAS_WORDS = re.compile(r"[^\W\d_]", re.UNICODE)
MAX_TAGS = 100
"""Most placeholder tags one segment carries; a sentence with more markup than that is sent as its
text runs, each on its own (the model could not keep them all, and the job would outgrow its text limit)."""
_HTML_WHITESPACE = re.compile(r"[ \t\r\n\f]+")
_WORD_STAND_IN = "\ufffc"
"""OBJECT REPLACEMENT CHARACTER: a worded unit in the plain text the sentence splitter reads."""


def block_parts(
    tokens: Sequence[str | Code],
    max_chars: int,
    escape: Escape,
    wrap: Wrap | None = None,
) -> list[str | Segment] | None:
    """``tokens`` (text runs and inline codes, in order) as literals and segments.

    ``None`` when the block has no words, or has text that itself looks like a placeholder tag
    (which the model could not tell from ours): the caller sends its runs as plain prose. The
    caller has made its URLs and e-mail addresses units already (:func:`protected`).
    """
    plain, offsets = _plain_text(tokens)
    spans = _sentence_spans(plain, max_chars, escape)
    if not spans or _looks_like_a_tag(tokens, escape):
        return None
    out: list[str | Segment] = []
    tokens = _split_text_tokens(tokens, spans)
    _, offsets = _plain_text(tokens)
    buckets = _assign(tokens, offsets, spans)
    position = 0
    while position < len(tokens):
        bucket = buckets[position]
        end = position
        while end < len(tokens) and buckets[end] == bucket:
            end += 1
        group = tokens[position:end]
        if bucket < 0:
            out.append(_raw(group))
        else:
            first, last = _peel(group)
            segment = _segment(group[first:last], escape, wrap)
            if len(segment.codes) > MAX_TAGS:
                return None  # more markup than words: the runs go out on their own
            out += [_raw(group[:first]), segment, _raw(group[last:])]
        position = end
    return [part for part in out if part != ""]


def protected(tokens: Sequence[str | Code]) -> list[str | Code]:
    """``tokens`` with every URL and e-mail address of a text run a worded unit (:mod:`markup.protected_spans`).

    Every segmenter's blocks and messages pass through here, so no format sends an address to the
    model: it sees ``<xN/>`` and the translation gets the address back byte for byte.
    """
    out: list[str | Code] = []
    for token in _joined(tokens):
        if not isinstance(token, str):
            out.append(token)
            continue
        position = 0
        for start, end in protected_spans(token):
            if start > position:
                out.append(token[position:start])
            out.append(Code(token[start:end], "unit", worded=True))
            position = end
        if position < len(token):
            out.append(token[position:])
    return out


def _joined(tokens: Sequence[str | Code]) -> list[str | Code]:
    """``tokens`` with adjacent text runs made one (a splitter may cut ``<https://…>`` at its ``<``)."""
    out: list[str | Code] = []
    run: list[str] = []
    for token in tokens:
        if isinstance(token, str):
            run.append(token)
            continue
        if run:
            out.append("".join(run))
            run = []
        out.append(token)
    if run:
        out.append("".join(run))
    return out


def segment_of(
    tokens: Sequence[str | Code], escape: Escape, *, raw: str, frame: tuple[str, str] = ("", "")
) -> Segment | None:
    """``tokens`` as one segment, however long, that stands for ``raw`` in the source (``None``: no words).

    For a message that is written somewhere else than its source: a gettext ``msgstr`` filled from
    its ``msgid`` (the source is the empty string, the translation is framed in quotes), an XLIFF
    ``<target>`` from its ``<source>``.
    """
    tokens = protected(tokens)
    if _looks_like_a_tag(tokens, escape):
        return None
    segment = _segment(tokens, escape, None)
    if not has_words(segment.text):
        return None
    return dataclass_replace(segment, raw=raw, frame=frame)


def has_words(text: str) -> bool:
    """Whether model ``text`` has a letter to translate: the one rule every format keeps to.

    Decided on the text as the model would read it (HTML entities and JSON escapes decoded, and
    character references read even where the format leaves them to the model: Markdown, a
    subtitle, a gettext message), placeholder tags left out. Without a letter (``&nbsp;``,
    ``"\\u2003"``, ``42``, ``--``) there is nothing to translate: the text is kept as it is, never a
    segment, so a table cell of ``&nbsp;`` cannot fail its document.
    """
    return bool(_HAS_WORDS.search(html.unescape(inline_tags.TAG.sub(" ", text))))


def decoded(raw: str, escape: Escape) -> str:
    """``raw`` as the model would read it (:func:`model_text`); as it is where it is no whole JSON string."""
    try:
        return model_text(raw, escape)
    except ValueError:  # a JSON run cut inside an escape: judged as written
        return raw


def _looks_like_a_tag(tokens: Sequence[str | Code], escape: Escape) -> bool:
    """Whether a text run reads as a placeholder tag to the model (``&lt;x1/&gt;`` in HTML or XML does too)."""
    return any(inline_tags.TAG.search(model_text(t, escape)) for t in tokens if isinstance(t, str))


def _raw(group: Sequence[str | Code]) -> str:
    return "".join(t if isinstance(t, str) else t.raw for t in group)


def _peel(group: Sequence[str | Code]) -> tuple[int, int]:
    """Where a sentence's text starts and ends once the markup around all of it is left out.

    A unit before or after the words (an image, a comment), or an element around the whole
    sentence (``<b>Note.</b>``, an image's alt text), needs no tag: fewer tags, fewer for the model
    to lose. A worded unit (a code span, a placeholder) is part of the sentence and stays in it.
    """
    pairs = _pair(group)
    first, last = 0, len(group)
    while first < last:
        head, tail = group[first], group[last - 1]
        if _framing(head):
            first += 1
        elif _framing(tail):
            last -= 1
        elif pairs.get(first) == last - 1:
            first, last = first + 1, last - 1
        else:
            break
    return first, last


def _framing(token: str | Code) -> bool:
    """Whether ``token`` is markup a sentence may leave outside: a unit, break or join that is no word of it."""
    return not isinstance(token, str) and token.kind in ("unit", "break", "join") and not token.worded


def _width(token: str | Code) -> int:
    """How many characters ``token`` takes in the plain text (:func:`_plain_text`)."""
    if isinstance(token, str):
        return len(token)
    return 1 if token.kind in ("space", "break") or token.worded else 0


def _plain_text(tokens: Sequence[str | Code]) -> tuple[str, list[int]]:
    """The block's text as the sentence splitter sees it, and each token's offset in it.

    A worded unit stands in as one character that is neither a letter nor a space: a code span
    that opens or closes a paragraph falls inside its sentence's span, and a sentence that starts
    with one (``It builds. `make` runs.``) is cut from the one before, as a capital would be.
    """
    parts: list[str] = []
    offsets: list[int] = []
    length = 0
    for token in tokens:
        offsets.append(length)
        if isinstance(token, str):
            text = token
        elif token.worded:  # a word to the sentence splitter, so the sentence around it takes it in
            text = _WORD_STAND_IN
        else:
            text = " " if token.kind in ("space", "break") else ""
        parts.append(text)
        length += len(text)
    return "".join(parts), offsets


def _sentence_spans(plain: str, max_chars: int, escape: Escape) -> list[tuple[int, int]]:
    """``(start, end)`` in ``plain`` of every span with words in it (whitespace between spans excluded)."""
    stripped = plain.strip()
    if not stripped or not has_words(decoded(stripped, escape)):
        return []
    spans: list[tuple[int, int]] = []
    position = len(plain) - len(plain.lstrip())
    for span in cut_prose(stripped, max_chars):
        if not span.isspace():
            spans.append((position, position + len(span)))
        position += len(span)
    return spans


def _assign(tokens: Sequence[str | Code], offsets: list[int], spans: list[tuple[int, int]]) -> list[int]:
    """Which span (segment) each token belongs to; -1 for a literal between segments.

    Text tokens are split beforehand so that none straddles a span's edge. An opening code at a
    span's edge goes with the text after it, a closing or unit code with the text before it
    (a unit code that opens the block goes with the first sentence); a space code only ever sits
    inside a span, or between spans as a literal.
    """
    buckets: list[int] = []
    span = 0
    last = -1
    for token, offset in zip(tokens, offsets, strict=True):
        while span < len(spans) and spans[span][1] < offset:
            span += 1
        if isinstance(token, str) or token.kind in ("space", "break") or token.worded:
            size = _width(token)
            inside = span < len(spans) and spans[span][0] <= offset and offset + size <= spans[span][1]
            if span < len(spans) and spans[span][1] == offset:
                inside = False
                if span + 1 < len(spans) and spans[span + 1][0] == offset and offset + size <= spans[span + 1][1]:
                    inside, span = True, span + 1
            bucket = span if inside else -1
        else:
            bucket = _code_bucket(token.kind, offset, spans, span)
        if bucket != -1 and bucket < last:
            bucket = last  # codes at one offset keep document order
        buckets.append(bucket)
        if bucket != -1:
            last = bucket
    return buckets


def _code_bucket(kind: str, offset: int, spans: list[tuple[int, int]], span: int) -> int:
    candidates = [i for i in (span - 1, span, span + 1) if 0 <= i < len(spans)]
    for i in candidates:
        start, end = spans[i]
        if start < offset < end:
            return i
    if kind == "open":
        return next((i for i in candidates if spans[i][0] == offset), -1)
    before = next((i for i in candidates if spans[i][1] == offset), -1)
    if before != -1:
        return before
    return next((i for i in candidates if spans[i][0] == offset), -1)


def _split_text_tokens(tokens: Sequence[str | Code], spans: list[tuple[int, int]]) -> list[str | Code]:
    """``tokens`` with every text run cut at the spans' edges, so each text run lies inside or outside one span."""
    edges = sorted({edge for span in spans for edge in span})
    out: list[str | Code] = []
    offset = following = 0  # following: the first edge not before this token (one pass: linear)
    for token in tokens:
        if isinstance(token, str):
            start = offset
            while following < len(edges) and edges[following] <= start:
                following += 1
            cuts = []
            while following < len(edges) and edges[following] < start + len(token):
                cuts.append(edges[following] - start)
                following += 1
            previous = 0
            for cut in [*cuts, len(token)]:
                if cut > previous:
                    out.append(token[previous:cut])
                previous = cut
            offset += len(token)
        else:
            out.append(token)
            offset += _width(token)
    return out


def _segment(group: Sequence[str | Code], escape: Escape, wrap: Wrap | None) -> Segment:
    """One sentence: its codes paired and numbered into tags, its text unescaped for the model."""
    pairs = _pair(group)
    codes: list[tuple[str, str]] = []
    number_of: dict[int, int] = {}  # index in group of an opening or unit code -> its tag number
    text: list[str] = []
    raw = "".join(t if isinstance(t, str) else t.raw for t in group)
    for index, token in enumerate(group):
        if isinstance(token, str):
            text.append(model_text(token, escape))
        elif token.kind == "space":
            text.append(" ")
        elif token.kind == "join":
            continue
        elif index in pairs:  # an opening code with its closing one
            closing = pairs[index]
            number = len(codes) + 1
            codes.append((token.raw, group[closing].raw))  # type: ignore[union-attr]
            number_of[closing] = number
            text.append(f"<x{number}>")
        elif index in number_of:
            text.append(f"</x{number_of[index]}>")
        else:
            codes.append((token.raw, ""))
            text.append(f"<x{len(codes)}/>")
    spans_lines = wrap is not None and (wrap.always or any(not isinstance(t, str) and t.kind == "space" for t in group))
    return Segment(text="".join(text), raw=raw, escape=escape, codes=tuple(codes), wrap=wrap if spans_lines else None)


def model_text(raw: str, escape: Escape) -> str:
    """A text run as the model reads it: HTML entities and JSON escapes decoded, HTML whitespace collapsed."""
    if escape in ("html", "attr"):  # HTML whitespace (not a no-break space) collapses: one line to the model
        return html.unescape(_HTML_WHITESPACE.sub(" ", raw))
    if escape == "json":
        return str(json.loads(f'"{raw}"'))
    return raw


def _pair(group: Sequence[str | Code]) -> dict[int, int]:
    """Opening code index -> its closing code's index, for the elements that open and close in ``group``."""
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for index, token in enumerate(group):
        if isinstance(token, str) or token.kind not in ("open", "close"):
            continue
        if token.kind == "open":
            stack.append(index)
            continue
        for depth in range(len(stack) - 1, -1, -1):
            opening = group[stack[depth]]
            if not isinstance(opening, str) and opening.name == token.name:
                pairs[stack[depth]] = index
                del stack[depth:]  # elements left open inside it stay units
                break
    return pairs

"""The :class:`Skeleton` of a document and the rules every format shares for cutting out segments."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Escape = Literal["", "html"]

_SENTENCE_END = re.compile(r"(?<=[.!?;:。！？])(\s+)")
_HAS_WORDS = re.compile(r"[^\W\d_]", re.UNICODE)  # at least one letter: otherwise nothing to translate


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of prose to translate: ``text`` goes to the model, ``raw`` is how the source spelled it."""

    text: str
    raw: str
    escape: Escape = ""

    def render(self, translation: str | None) -> str:
        """The segment in the output: the source if untranslated (or unchanged), else the translation."""
        if translation is None or translation == self.text:
            return self.raw
        return html.escape(translation, quote=False) if self.escape == "html" else translation


@dataclass(slots=True)
class Skeleton:
    """Literal strings and segments in document order."""

    pieces: list[str | Segment] = field(default_factory=list)

    @property
    def segments(self) -> list[Segment]:
        """The segments, in order (their index is the job's ``sequence``)."""
        return [p for p in self.pieces if isinstance(p, Segment)]

    def literal(self, text: str) -> None:
        """Append text kept as it is (merged with a literal before it)."""
        if not text:
            return
        if self.pieces and isinstance(self.pieces[-1], str):
            self.pieces[-1] += text
        else:
            self.pieces.append(text)

    def prose(self, raw: str, max_chars: int, *, escape: Escape = "") -> None:
        """Append prose: surrounding whitespace stays literal, long text is cut at sentence ends."""
        stripped = raw.strip()
        if not stripped:
            self.literal(raw)
            return
        start = raw.index(stripped)
        self.literal(raw[:start])
        if not _HAS_WORDS.search(stripped):
            self.literal(stripped)
        else:
            for part in _cut(stripped, max_chars):
                if part.isspace():
                    self.literal(part)
                else:
                    text = html.unescape(part) if escape == "html" else part
                    self.pieces.append(Segment(text=text, raw=part, escape=escape))
        self.literal(raw[start + len(stripped) :])

    def assemble(self, translations: Sequence[str | None]) -> str:
        """The document with segment ``i`` replaced by ``translations[i]`` (``None``: keep the source)."""
        out: list[str] = []
        index = 0
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
            else:
                out.append(piece.render(translations[index]))
                index += 1
        if index != len(translations):
            raise ValueError(f"{len(translations)} translations for {index} segments")
        return "".join(out)

    def source(self) -> str:
        """The source document again (every segment untranslated)."""
        return self.assemble([None] * len(self.segments))

    def to_json(self) -> list[Any]:
        """A JSON-ready form (stored with the document until it is assembled)."""
        return [p if isinstance(p, str) else [p.text, p.raw, p.escape] for p in self.pieces]

    @classmethod
    def from_json(cls, data: list[Any]) -> Skeleton:
        """The skeleton :meth:`to_json` produced."""
        return cls([p if isinstance(p, str) else Segment(text=p[0], raw=p[1], escape=p[2]) for p in data])


def _cut(text: str, max_chars: int) -> list[str]:
    """``text`` in pieces of at most ``max_chars``: at sentence ends, else at spaces, else anywhere."""
    if len(text) <= max_chars:
        return [text]
    parts: list[str] = []
    current = ""
    for piece in _SENTENCE_END.split(text):
        if piece.isspace():
            if current:
                parts.append(current)
                current = ""
            parts.append(piece)
        elif len(current) + len(piece) <= max_chars:
            current += piece
        else:
            if current:
                parts.append(current)
            current = ""
            parts.extend(_hard_cut(piece, max_chars))
    if current:
        parts.append(current)
    return parts


def _hard_cut(text: str, max_chars: int) -> list[str]:
    """A sentence longer than ``max_chars``: cut at the last space before the limit (whitespace kept)."""
    parts: list[str] = []
    while len(text) > max_chars:
        cut = text.rfind(" ", 1, max_chars)
        cut = cut if cut > 0 else max_chars
        parts.append(text[:cut])
        rest = text[cut:]
        spaces = len(rest) - len(rest.lstrip())
        if spaces:
            parts.append(rest[:spaces])
        text = rest[spaces:]
    if text:
        parts.append(text)
    return parts

"""The :class:`Skeleton` of a document and the rules every format shares for cutting out segments."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from contract.errors import DocumentTooLargeError
from contract.sentences import cut_prose

Escape = Literal["", "html"]

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
    """Literal strings and segments in document order.

    With ``max_segments``, adding one segment more raises :class:`DocumentTooLargeError` at once,
    so a huge document is refused before it has used the memory of millions of segments.
    """

    pieces: list[str | Segment] = field(default_factory=list)
    max_segments: int | None = None
    _count: int = 0
    _tail: list[str] = field(default_factory=list)  # literals since the last segment, joined once

    @property
    def segments(self) -> list[Segment]:
        """The segments, in order (their index is the job's ``sequence``)."""
        self._flush()
        return [p for p in self.pieces if isinstance(p, Segment)]

    def literal(self, text: str) -> None:
        """Append text kept as it is (merged with the literals around it, in linear time)."""
        if text:
            self._tail.append(text)

    def _flush(self) -> None:
        if self._tail:
            last = self.pieces[-1] if self.pieces else None
            if isinstance(last, str):
                self.pieces.pop()
                self._tail.insert(0, last)
            self.pieces.append("".join(self._tail))
            self._tail.clear()

    def prose(self, raw: str, max_chars: int, *, escape: Escape = "") -> None:
        """Append prose: surrounding whitespace stays literal, long text is cut at sentence ends."""
        stripped = raw.strip()
        if not stripped:
            self.literal(raw)
            return
        start = len(raw) - len(raw.lstrip())
        self.literal(raw[:start])
        if not _HAS_WORDS.search(stripped):
            self.literal(stripped)
        else:
            for part in cut_prose(stripped, max_chars):
                if part.isspace():
                    self.literal(part)
                else:
                    text = html.unescape(part) if escape == "html" else part
                    self._add(Segment(text=text, raw=part, escape=escape))
        self.literal(raw[start + len(stripped) :])

    def _add(self, segment: Segment) -> None:
        if self.max_segments is not None and self._count >= self.max_segments:
            raise DocumentTooLargeError(
                f"the document splits into more than {self.max_segments:,} segments "
                "(DRAGOMAN_MAX_DOCUMENT_SEGMENTS); split it into smaller documents or raise the segment length"
            )
        self._count += 1
        self._flush()
        self.pieces.append(segment)

    def assemble(self, translations: Sequence[str | None]) -> str:
        """The document with segment ``i`` replaced by ``translations[i]`` (``None``: keep the source)."""
        self._flush()
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
        self._flush()
        return [p if isinstance(p, str) else [p.text, p.raw, p.escape] for p in self.pieces]

    @classmethod
    def from_json(cls, data: list[Any]) -> Skeleton:
        """The skeleton :meth:`to_json` produced."""
        return cls([p if isinstance(p, str) else Segment(text=p[0], raw=p[1], escape=p[2]) for p in data])

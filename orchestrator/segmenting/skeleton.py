"""The :class:`Skeleton` of a document and the rules every format shares for cutting out segments."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from typing import Any

from contract.errors import DocumentTooLargeError
from contract.sentences import cut_prose
from orchestrator.segmenting.inline_block import block_parts, decoded, has_words, model_text, protected
from orchestrator.segmenting.parts import (
    Code,
    Escape,
    LangAttribute,
    Marked,
    Part,
    PluralForms,
    Segment,
    Wrap,
    fill_attached,
)

__all__ = ["Code", "Escape", "LangAttribute", "Marked", "Part", "PluralForms", "Segment", "Skeleton", "Wrap"]


@dataclass(slots=True)
class Skeleton:
    """Literal strings and segments in document order.

    With ``max_segments``, adding one segment more raises :class:`DocumentTooLargeError` at once,
    so a huge document is refused before it has used the memory of millions of segments.
    """

    parts: list[Part] = field(default_factory=list)
    max_segments: int | None = None
    _count: int = 0
    _tail: list[str] = field(default_factory=list)  # literals since the last segment, joined once

    @property
    def segments(self) -> list[Segment]:
        """The segments, in order (their index is the job's ``sequence``)."""
        self._flush()
        return [p for p in self.parts if isinstance(p, Segment)]

    def literal(self, text: str) -> None:
        """Append text kept as it is (merged with the literals around it, in linear time)."""
        if text:
            self._tail.append(text)

    def _flush(self) -> None:
        if self._tail:
            last = self.parts[-1] if self.parts else None
            if isinstance(last, str):
                self.parts.pop()
                self._tail.insert(0, last)
            self.parts.append("".join(self._tail))
            self._tail.clear()

    def prose(self, raw: str, max_chars: int, *, escape: Escape = "") -> None:
        """Append prose: surrounding whitespace stays literal, long text is cut at sentence ends.

        A URL or e-mail address in it makes it a block whose addresses are unit tags (:func:`protected`).
        """
        tokens = protected([raw])
        if len(tokens) > 1 or isinstance(tokens[0], Code):
            self.block(tokens, max_chars, escape=escape)
        else:
            self._prose(raw, max_chars, escape)

    def _prose(self, raw: str, max_chars: int, escape: Escape) -> None:
        """Prose known to hold no protected span: each sentence a segment without tags."""
        stripped = raw.strip()
        if not stripped:
            self.literal(raw)
            return
        start = len(raw) - len(raw.lstrip())
        self.literal(raw[:start])
        if not has_words(decoded(stripped, escape)):
            self.literal(stripped)
        else:
            for part in cut_prose(stripped, max_chars):
                if part.isspace():
                    self.literal(part)
                else:
                    text = model_text(part, escape)
                    self.add_segment(Segment(text=text, raw=part, escape=escape))
        self.literal(raw[start + len(stripped) :])

    def add_marked(self, raw: str, translated: str) -> None:
        """Append text that becomes ``translated`` once the next segment added is translated."""
        self._flush()
        self.parts.append(Marked(raw, translated, self._count))

    def add_lang(self, attribute: LangAttribute | PluralForms) -> None:
        """Append a ``lang`` attribute value or gettext plural forms (set for the target language when assembled)."""
        self._flush()
        self.parts.append(attribute)

    def block(
        self,
        tokens: Sequence[str | Code],
        max_chars: int,
        *,
        escape: Escape = "",
        wrap: Wrap | None = None,
    ) -> None:
        """Append a block of prose with inline markup: whole sentences as segments with placeholder tags.

        ``wrap``: the block was hard-wrapped text; its translations are wrapped the same way.
        """
        tokens = protected(tokens)
        parts = block_parts(tokens, max_chars, escape, wrap)
        if parts is None:  # nothing to translate, or text that looks like a placeholder tag itself
            self._without_tags(tokens, max_chars, escape)
            return
        for part in parts:
            if isinstance(part, str):
                self.literal(part)
            else:
                self.add_segment(part)

    def _without_tags(self, tokens: Sequence[str | Code], max_chars: int, escape: Escape) -> None:
        """A block as before placeholder tags: each text run its own prose, the markup literal between."""
        run: list[str] = []
        for token in tokens:
            if isinstance(token, str):
                run.append(token)
                continue
            self._prose("".join(run), max_chars, escape)
            run = []
            self.literal(token.raw)
        self._prose("".join(run), max_chars, escape)

    def add_detached(self, segment: Segment) -> int | None:
        """Add a segment rendered inside a later code's raw (at ``U+FDD0 index U+FDD1``); return its index.

        ``None``: it has nothing to translate (:func:`has_words`), and its raw stays where it is.
        """
        if not has_words(segment.text):
            return None
        self.add_segment(dataclass_replace(segment, detached=True))
        return self._count - 1

    def add_segment(self, segment: Segment) -> None:
        """Append one segment (over ``max_segments`` raises :class:`DocumentTooLargeError`).

        A segment whose model text has no letter (:func:`has_words`: ``&nbsp;``, a JSON ``"\\u00a0"``)
        is its raw kept as a literal: every format's segments pass through here, so none can send
        the model only whitespace (a job that would be refused and fail the whole document).
        """
        if not has_words(segment.text):
            if segment.detached:
                raise ValueError("a detached segment without words: add_detached keeps it literal")
            self.literal(segment.raw)
            return
        if self.max_segments is not None and self._count >= self.max_segments:
            raise DocumentTooLargeError(
                f"the document splits into more than {self.max_segments:,} segments "
                "(DRAGOMAN_MAX_DOCUMENT_SEGMENTS); split it into smaller documents or raise the segment length"
            )
        self._count += 1
        self._flush()
        self.parts.append(segment)

    def assemble(self, translations: Sequence[str | None], target_lang: str | None = None) -> str:
        """The document with segment ``i`` replaced by ``translations[i]`` (``None``: keep the source).

        With ``target_lang``, HTML ``lang`` attributes name it.
        """
        self._flush()
        segments = [p for p in self.parts if isinstance(p, Segment)]
        if len(segments) != len(translations):
            raise ValueError(f"{len(translations)} translations for {len(segments)} segments")
        attached: list[str | None] = [
            s.render(t) if s.detached else None for s, t in zip(segments, translations, strict=True)
        ]
        out: list[str] = []
        index = 0
        for part in self.parts:
            if isinstance(part, str):
                out.append(fill_attached(part, attached))
            elif isinstance(part, LangAttribute):
                out.append(part.render(target_lang))
            elif isinstance(part, Marked):
                out.append(part.render(translations))
            elif isinstance(part, PluralForms):
                out.append(part.render(target_lang, translations, attached))
            else:
                if not part.detached:
                    out.append(part.render(translations[index], attached))
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
        return [_part_to_json(p) for p in self.parts]

    @classmethod
    def from_json(cls, data: list[Any]) -> Skeleton:
        """The skeleton :meth:`to_json` produced."""
        return cls([_part_from_json(p) for p in data])


def _part_to_json(part: Part) -> Any:
    if isinstance(part, str):
        return part
    if isinstance(part, LangAttribute):
        if part.template == "{}" and part.value == "tag":
            return {"lang": part.raw}
        return {"lang": part.raw, "value": part.value, "template": part.template, "catalogue": list(part.catalogue)}
    if isinstance(part, PluralForms):
        return {
            "plurals": [
                part.raw,
                list(part.forms),
                list(part.segments),
                part.singular,
                part.prefix,
                part.newline,
                list(part.catalogue),
            ]
        }
    if isinstance(part, Marked):
        return {"marked": [part.raw, part.translated, part.segment]}
    wrap = None if part.wrap is None else list(part.wrap)
    frame = list(part.frame) if part.frame != ("", "") else None
    return [part.text, part.raw, part.escape, [list(c) for c in part.codes], part.detached, wrap, frame]


def _part_from_json(data: Any) -> Part:
    if isinstance(data, str):
        return data
    if isinstance(data, dict) and "marked" in data:
        raw, translated, segment = data["marked"]
        return Marked(raw, translated, int(segment))
    if isinstance(data, dict) and "plurals" in data:
        raw, forms, segments, singular, prefix, newline, catalogue = data["plurals"]
        indices = tuple(int(i) for i in segments)
        return PluralForms(raw, (forms[0], forms[1]), indices, singular, prefix, newline, (catalogue[0], catalogue[1]))
    if isinstance(data, dict):
        catalogue = data.get("catalogue", ["", ""])
        return LangAttribute(
            data["lang"], data.get("value", "tag"), data.get("template", "{}"), (catalogue[0], catalogue[1])
        )
    return _segment_from_json(data)


def _segment_from_json(data: list[Any]) -> Segment:
    codes = tuple((c[0], c[1]) for c in data[3]) if len(data) > 3 else ()  # skeletons stored before codes had 3 fields
    detached = bool(data[4]) if len(data) > 4 else False
    wrap = Wrap(*data[5]) if len(data) > 5 and data[5] else None
    frame = (str(data[6][0]), str(data[6][1])) if len(data) > 6 and data[6] else ("", "")
    return Segment(text=data[0], raw=data[1], escape=data[2], codes=codes, detached=detached, wrap=wrap, frame=frame)

"""The source language of a document sent with ``source_lang="auto"``: detected once, from its whole text.

A document's segments are detected together, not one by one as stand-alone jobs are: a heading of
three words or a table cell would be misread on its own, and every segment of one document is in
one language. The sample is the model text of the segments in order (their placeholder tags left
out) up to the detector's two thousand characters.
"""

from __future__ import annotations

from collections.abc import Sequence

from contract.errors import LanguageNotDetectedError
from contract.inline_tags import strip_tags
from contract.language_detection import LanguageDetector
from orchestrator.segmenting.parts import Segment

SAMPLE_CHARS = 2_000
"""Characters of the document's segments the detector reads (the language of a document shows in them)."""

MIN_LETTERS = 20
"""Fewer letters than this (a document of a word or two) is too little text to tell a language from."""

ADVICE = "send the document again with its language: --from LANG on the command line, source_lang=LANG over HTTP"
"""What a document whose language cannot be detected needs, in every failure this module raises."""


class DetectionUnavailableError(LanguageNotDetectedError):
    """Language detection cannot run in this orchestrator (py3langid is not installed where it runs)."""


def document_sample(segments: Sequence[Segment], limit: int = SAMPLE_CHARS) -> str:
    """The text detection reads: the segments' model text without placeholder tags, one a line, up to ``limit``."""
    parts: list[str] = []
    size = 0
    for segment in segments:
        text = strip_tags(segment.text).strip()
        if not text:
            continue
        parts.append(text)
        size += len(text) + 1
        if size >= limit:
            break
    return "\n".join(parts)[:limit]


async def detect_document_language(segments: Sequence[Segment], detector: LanguageDetector) -> str:
    """The canonical code of the document's language, from :func:`document_sample`.

    Raises :class:`LanguageNotDetectedError` (the document fails with it) for too little text, a text
    the detector cannot tell with confidence (mixed languages, say), or no detector installed.
    """
    sample = document_sample(segments)
    letters = sum(1 for character in sample if character.isalpha())
    if letters < MIN_LETTERS:
        raise LanguageNotDetectedError(
            f"source_lang was 'auto' but the document has too little text to tell its language ({letters} letters; "
            f"detection needs {MIN_LETTERS}); {ADVICE}"
        )
    try:
        await detector.ready()
    except ImportError as exc:
        raise DetectionUnavailableError(
            f"source_lang was 'auto' but this orchestrator (`dragoman rq-worker`) cannot detect languages: {exc} "
            "(install dragoman[api] where it runs, which brings py3langid); or " + ADVICE
        ) from exc
    return detector.detect(sample, subject="document", advice=ADVICE)

"""The sample a ``source_lang="auto"`` document is detected from, and the detection's refusals (no servers)."""

from __future__ import annotations

import pytest

from contract.errors import LanguageNotDetectedError
from contract.language_detection import LanguageDetector
from orchestrator.segmenting.parts import Segment
from orchestrator.source_language import MIN_LETTERS, detect_document_language, document_sample


def _segments(*texts: str) -> list[Segment]:
    return [Segment(text, text) for text in texts]


def test_the_sample_is_the_segments_text_without_tags_up_to_the_limit() -> None:
    segments = _segments("Click <x1>the guide</x1> to start.", "   ", "Then <x1/> read on.", "Never reached.")
    assert document_sample(segments, limit=40) == "Click the guide to start.\nThen  read on."
    assert document_sample(segments).endswith("Never reached.")
    assert len(document_sample(_segments("word " * 1_000))) == 2_000


async def test_segments_too_short_alone_are_detected_together() -> None:
    segments = _segments("Save", "Ok", "Cancel", "Open the settings and choose the language you read best.")
    assert await detect_document_language(segments, LanguageDetector()) == "en"


async def test_too_little_text_is_refused_before_the_detector_is_asked() -> None:
    class Unused(LanguageDetector):
        async def ready(self) -> None:
            raise AssertionError("the detector is not needed for this")

    with pytest.raises(LanguageNotDetectedError, match=f"too little text .*detection needs {MIN_LETTERS}.*--from"):
        await detect_document_language(_segments("OK", "<x1/> 42"), Unused())

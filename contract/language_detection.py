"""Language identification: the source of jobs sent with ``source_lang = "auto"``, and LibreTranslate's ``/detect``.

py3langid (a NumPy port of langid.py: 97 languages, its model inside the wheel, no download)
classifies a text in well under a millisecond, so it runs inline; loading the model takes most of
a second, so that happens once, off the event loop, when the first ``auto`` job arrives.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from contract.errors import LanguageNotDetectedError, UnsupportedLanguageError
from contract.languages import language_name, normalize_language

DEFAULT_MIN_CONFIDENCE = 0.5
"""A probability taken as a detection whatever the runner-up; below it, see :data:`LEAD_FACTOR`."""

LEAD_FACTOR = 3.0
"""A less probable best guess still counts when it is this many times as likely as the next language.

Short texts spread probability over the 140 labels: "The cat sleeps." is English at 32% with
Romanian next at 5%, while "Спасибо" is Uzbek at 23% against Russian at 14%; the lead tells
the first (a detection) from the second (a guess).
"""
_FLOOR = 0.1  # below this no lead makes a guess a detection

_SAMPLE_CHARS = 2_000  # the language of a long text shows in its first two thousand characters
_JOB_ADVICE = "send the job again with source_lang set to its language code"


_MODEL_LOCK = threading.Lock()
_model: Any = None  # the loaded identifier, shared by every detector of the process (read-only once loaded)


def _load_model() -> Any:
    """py3langid's model, loaded once per process: each load takes one to three seconds of CPU."""
    global _model
    with _MODEL_LOCK:
        if _model is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _model


class LanguageDetector:
    """Tells the language of a text, or raises :class:`LanguageNotDetectedError` when it cannot with confidence."""

    def __init__(self, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> None:
        self.min_confidence = min_confidence
        self._identifier: Any = _model

    async def ready(self) -> None:
        """Load the model (once per process, in a thread) so that :meth:`detect` does not block the event loop."""
        if self._identifier is None:
            self._identifier = await asyncio.to_thread(_load_model)

    def _load(self) -> Any:
        if self._identifier is None:
            self._identifier = _load_model()
        return self._identifier

    def guess(self, text: str) -> tuple[str | None, float]:
        """The most probable language of ``text`` (its canonical code, ``None`` for no language) and its probability.

        Unlike :meth:`detect` it never raises: the quality check decides itself how sure is sure enough.
        """
        identifier = self._identifier if self._identifier is not None else self._load()
        code, probability = identifier.classify(text[:_SAMPLE_CHARS])
        try:
            return normalize_language(code), float(probability)
        except UnsupportedLanguageError:
            return None, float(probability)

    def ranked(self, text: str, limit: int = 3) -> list[tuple[str, float]]:
        """The ``limit`` most probable languages of ``text``, most probable first, as (canonical code, probability).

        Labels that name no language (``zxx``) are skipped; the same code twice (py3langid has two
        ``sr`` and two ``uz`` labels) is kept once, at its higher probability.
        """
        identifier = self._identifier if self._identifier is not None else self._load()
        found: dict[str, float] = {}
        for code, probability in identifier.rank(text[:_SAMPLE_CHARS]):
            try:
                language = normalize_language(code)
            except UnsupportedLanguageError:
                continue
            found.setdefault(language, float(probability))
            if len(found) == limit:
                break
        return list(found.items())

    def languages(self) -> list[str]:
        """Every language the model tells apart, as canonical codes, sorted (``zxx`` and duplicates left out)."""
        identifier = self._identifier if self._identifier is not None else self._load()
        codes = set()
        for code in identifier.nb_classes:
            try:
                codes.add(normalize_language(str(code)))
            except UnsupportedLanguageError:
                continue
        return sorted(codes)

    def detect(self, text: str, *, subject: str = "text", advice: str = _JOB_ADVICE) -> str:
        """The canonical code of ``text``'s language ("fr", "zh"...); loads the model if :meth:`ready` did not.

        ``subject`` and ``advice`` word the error for what was sent (a job's text, a document's).
        """
        identifier = self._identifier if self._identifier is not None else self._load()
        ranked = identifier.rank(text[:_SAMPLE_CHARS])
        code, probability = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
        try:
            language = normalize_language(code)
        except UnsupportedLanguageError:  # "zxx" and the like: no linguistic content
            language = None
        leads = probability >= _FLOOR and probability >= LEAD_FACTOR * runner_up
        if language is None or not (probability >= self.min_confidence or leads):
            guess = f"{code} ({language_name(language)})" if language is not None else code
            raise LanguageNotDetectedError(
                f"source_lang was 'auto' but the {subject}'s language could not be told with confidence (best guess "
                f"{guess} at {probability:.0%}, the next at {runner_up:.0%}; a detection needs "
                f"{self.min_confidence:.0%}, or {LEAD_FACTOR:.0f} times the next); {advice}"
            )
        return language

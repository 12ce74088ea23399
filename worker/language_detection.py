"""Source-language detection for jobs sent with ``source_lang = "auto"``.

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
"""The lowest probability taken as a detection; below it the job fails and says to send the language."""

_SAMPLE_CHARS = 2_000  # the language of a long text shows in its first two thousand characters


class LanguageDetector:
    """Tells the language of a text, or raises :class:`LanguageNotDetectedError` when it cannot with confidence."""

    def __init__(self, min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> None:
        self.min_confidence = min_confidence
        self._identifier: Any = None
        self._lock = threading.Lock()

    async def ready(self) -> None:
        """Load the model (once, in a thread) so that :meth:`detect` does not block the event loop."""
        if self._identifier is None:
            await asyncio.to_thread(self._load)

    def _load(self) -> Any:
        with self._lock:
            if self._identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            return self._identifier

    def detect(self, text: str) -> str:
        """The canonical code of ``text``'s language ("fr", "zh"...); loads the model if :meth:`ready` did not."""
        identifier = self._identifier if self._identifier is not None else self._load()
        code, probability = identifier.classify(text[:_SAMPLE_CHARS])
        try:
            language = normalize_language(code)
        except UnsupportedLanguageError:  # "zxx" and the like: no linguistic content
            language = None
        if language is None or probability < self.min_confidence:
            guess = f"{code} ({language_name(language)})" if language is not None else code
            raise LanguageNotDetectedError(
                f"source_lang was 'auto' but the text's language could not be told with confidence (best guess "
                f"{guess} at {probability:.0%}, under the {self.min_confidence:.0%} needed); send the job again "
                "with source_lang set to its language code"
            )
        return language

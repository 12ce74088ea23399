"""Language identification: the source of jobs sent with ``source_lang = "auto"``, and LibreTranslate's ``/detect``.

py3langid (a NumPy port of langid.py: 97 languages, its model inside the wheel, no download)
classifies a text in well under a millisecond, so it runs inline; loading the model takes most of
a second, so that happens once, off the event loop, when the first ``auto`` job arrives.

Two ways to use a detection. :meth:`LanguageDetector.detect` is strict: a text it cannot tell with
confidence is refused (the native API's default). :meth:`LanguageDetector.best_guess` never refuses: a
job that carries **source hints** (the languages its sender finds likely: the rest of its request's,
the API key's recent ones, the deployment's default; :func:`choose_language`) gets the text's own
language when the detector is sure of it, else the first hint the text does not rule out, else the
detector's best guess. On 600 short UI strings in twenty languages (bench/RESULTS.md, issue 49) a
larger detector (Lingua) was right on 10 points more strings alone, at 5-6 times the cost per call and
1.1 GB more memory per process; with the request's or the key's hints both were within two points, so
py3langid stays.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from contract.errors import InvalidJobError, LanguageNotDetectedError, UnsupportedLanguageError, shown
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

HINT_FACTOR = 10.0
"""A source hint is taken for a text the detector is not sure of unless the detector finds it this many times less
likely than its best guess: ``Save`` in an English request is English (English at 1.6%, Breton first at 2.2%),
``Привет`` is not (English at 0.0%). Measured against 5 and 20 on the UI-string sample (bench/detection.py)."""

MAX_SOURCE_HINTS = 8
"""Most source hints a job may carry (they are the request's language, a few recent ones and a default)."""

_SAMPLE_CHARS = 2_000  # the language of a long text shows in its first two thousand characters
_JOB_ADVICE = (
    "send the job again with source_lang set to its language code (or, on POST /v1/jobs, with detection "
    "best_guess: a guess, never a failure)"
)


class GuessBasis(StrEnum):
    """Why a best guess is the language it is (:func:`choose_language`)."""

    TEXT = "text"  # the detector is sure of the text on its own
    HINT = "hint"  # the detector is not sure, and does not rule out this source hint
    GUESS = "guess"  # the detector's likeliest language, though it is not sure and no hint fits


@dataclass(frozen=True, slots=True)
class Guess:
    """A text's language as a best guess: its canonical code, the detector's probability of it, and why it was taken."""

    language: str
    probability: float
    basis: GuessBasis


def is_sure(ranked: Sequence[tuple[str | None, float]], min_confidence: float = DEFAULT_MIN_CONFIDENCE) -> bool:
    """Whether a ranking (most probable first) makes its first language a detection: at least ``min_confidence``,
    or at least 10% and :data:`LEAD_FACTOR` times the runner-up (a ``None`` first entry, no language, never is)."""
    if not ranked or ranked[0][0] is None:
        return False
    probability = ranked[0][1]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    return probability >= min_confidence or (probability >= _FLOOR and probability >= LEAD_FACTOR * runner_up)


def choose_language(
    ranked: Sequence[tuple[str | None, float]],
    hints: Sequence[str],
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    hint_factor: float = HINT_FACTOR,
) -> Guess:
    """A text's language from its detector ranking (canonical codes, most probable first; ``None`` for a label that
    names no language) and its source hints (most likely first): never a refusal.

    The text's own first language when the ranking is sure of it (:func:`is_sure`); else the first hint whose
    probability is at least 1/``hint_factor`` (:data:`HINT_FACTOR`) of the best guess's (a hint in another
    script is ruled out); else the best guess itself. A text whose likeliest label names no language (digits,
    symbols) takes the first hint. Pure and detector-agnostic: the benchmark applies it to other detectors' rankings.
    """
    if not hints:
        raise ValueError("choose_language needs at least one source hint (the deployment's default language)")
    languages = [(code, probability) for code, probability in ranked if code is not None]
    if is_sure(ranked, min_confidence):
        language, probability = languages[0]
        return Guess(language, probability, GuessBasis.TEXT)
    if not languages or ranked[0][0] is None:  # digits, symbols: no language to translate from, any hint will do
        return Guess(hints[0], 0.0, GuessBasis.HINT)
    best = languages[0][1]
    found: dict[str, float] = {}
    for code, probability in languages:
        found.setdefault(code, probability)
    for hint in hints:
        probability = found.get(hint, 0.0)
        if probability > 0 and probability * hint_factor >= best:
            return Guess(hint, probability, GuessBasis.HINT)
    language, probability = languages[0]
    return Guess(language, probability, GuessBasis.GUESS)


def validate_source_hints(hints: object) -> tuple[str, ...]:
    """``hints`` (a list of language codes, most likely first) as canonical codes, duplicates dropped; ``None`` is none.

    At most :data:`MAX_SOURCE_HINTS`; anything else is an :class:`~contract.errors.InvalidJobError` naming it.
    """
    if hints is None:
        return ()
    if not isinstance(hints, list | tuple):
        raise InvalidJobError(f"source_hints must be a list of language codes, got {type(hints).__name__}")
    if len(hints) > MAX_SOURCE_HINTS:
        raise InvalidJobError(f"source_hints has {len(hints)} languages; at most {MAX_SOURCE_HINTS} are allowed")
    canonical: list[str] = []
    for hint in hints:
        try:
            code = normalize_language(hint)
        except InvalidJobError as exc:
            raise InvalidJobError(f"source_hints: {shown(hint)} is not a language code ({exc})") from None
        if code not in canonical:
            canonical.append(code)
    return tuple(canonical)


@functools.cache
def _canonical_label(code: str) -> str | None:
    """A detector label as a canonical language code, ``None`` for one that names no language (``zxx``); cached:
    a ranking has 140 of them, and normalizing each anew cost three times the ranking itself."""
    try:
        return normalize_language(code)
    except UnsupportedLanguageError:
        return None


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

    def _ranking(self, text: str) -> list[tuple[str | None, float]]:
        """Every label's probability for ``text``, most probable first, as canonical codes (``None``: no language)."""
        identifier = self._identifier if self._identifier is not None else self._load()
        return [
            (_canonical_label(code), float(probability)) for code, probability in identifier.rank(text[:_SAMPLE_CHARS])
        ]

    def best_guess(self, text: str, hints: Sequence[str]) -> Guess:
        """``text``'s language, never a refusal: sure of the text, else a hint it does not rule out, else the
        detector's best guess (:func:`choose_language`). ``hints``: at least one, most likely first."""
        return choose_language(self._ranking(text), hints, self.min_confidence)

    def probability(self, text: str, language: str) -> float:
        """The detector's probability that ``text`` is in ``language`` (a canonical code; 0 for one it does not know):
        how sure it is of a language a best guess took from a hint."""
        return next((p for code, p in self._ranking(text) if code == language), 0.0)

    def sure_language(self, text: str) -> str | None:
        """``text``'s language when the detector is sure of it (what :meth:`detect` would answer), else ``None``."""
        ranking = self._ranking(text)
        return ranking[0][0] if is_sure(ranking, self.min_confidence) else None

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
        top = [(language, float(probability)), (None, float(runner_up))]
        if language is None or not is_sure(top, self.min_confidence):
            guess = f"{code} ({language_name(language)})" if language is not None else code
            raise LanguageNotDetectedError(
                f"source_lang was 'auto' but the {subject}'s language could not be told with confidence (best guess "
                f"{guess} at {probability:.0%}, the next at {runner_up:.0%}; a detection needs "
                f"{self.min_confidence:.0%}, or {LEAD_FACTOR:.0f} times the next); {advice}"
            )
        return language

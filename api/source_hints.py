"""Source hints: what the worker's best guess falls back on for a request's texts sent without a source language.

DeepL answers every text, ``Save`` and ``Gracias`` included, and LibreTranslate falls back rather than refuse; a
detector cannot tell one or two words with confidence (py3langid is sure of 56% of 600 short UI strings,
bench/RESULTS.md). So the DeepL and LibreTranslate doors, and the native API's jobs sent with ``detection:
best_guess`` (the console's), give each ``auto`` job the hints a person would use, most telling first:

1. the request's language: its texts together, when the detector is sure of them (``Save``, ``Cancel`` and
   ``Open the file`` in one request are English);
2. the key's recent languages: the languages of its tenant's last ``DRAGOMAN_DETECTION_RECENT_REQUESTS``
   requests whose language the detector was sure of, the more frequent first (kept in Redis through
   :mod:`broker.recent_sources`; this request's is recorded here);
3. ``DRAGOMAN_DETECTION_DEFAULT_LANGUAGE`` (``en``).

The worker takes the text's own language when it is sure of it, else the first hint the text does not rule out
(a hint in another script is: ``Привет`` is never English), else its best guess
(:func:`contract.language_detection.choose_language`): never a failure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from api.services import ApiServices
from broker.recent_sources import recent_sources
from contract.controls import AUTO_LANGUAGE
from contract.language_detection import LanguageDetector
from contract.schemas import TranslationRequest, normalize_source_language

_DETECTOR = LanguageDetector()  # py3langid's model, shared by the process's detectors, loaded on first use
_REQUEST_SAMPLE_CHARS = 2_000  # the detector reads no more of a text; a request's texts are sampled to this
_RECENT_HINTS = 3  # the key's most frequent recent languages given as hints


def request_language(texts: Sequence[str]) -> str | None:
    """The language of ``texts`` read together (in order, up to the detector's 2,000 characters), when the detector
    is sure of it; ``None`` otherwise. Blocking (under a millisecond for short texts): run on the work threads."""
    sample: list[str] = []
    size = 0
    for text in texts:
        if size >= _REQUEST_SAMPLE_CHARS:
            break
        sample.append(text[: _REQUEST_SAMPLE_CHARS - size])
        size += len(sample[-1]) + 1
    return _DETECTOR.sure_language("\n".join(sample)) if sample else None


async def source_hints(api: ApiServices, tenant: str, texts: Sequence[str]) -> tuple[str, ...]:
    """The source hints of one request's ``auto`` texts (the module's three, duplicates dropped), and its language
    recorded for ``tenant`` when the detector is sure of it: one detection on the work threads, one Redis call."""
    await _DETECTOR.ready()
    language = await api.work.run(request_language, texts)
    settings = api.settings
    recent: list[str] = []
    if settings.detection_recent_requests > 0:
        recent = await recent_sources(
            api.client.redis,
            api.client.keys,
            tenant,
            limit=_RECENT_HINTS,
            keep=settings.detection_recent_requests,
            record=language,
        )
    hints = [language] if language is not None else []
    hints += [*recent, settings.detection_default_language]
    return tuple(dict.fromkeys(hints))


async def with_source_hints(
    api: ApiServices, tenant: str, requests: list[TranslationRequest], wanted: Sequence[bool]
) -> list[TranslationRequest]:
    """``requests`` with source hints on those that are ``auto`` and ``wanted`` (a best guess was asked for): the
    hints of their texts together (:func:`source_hints`); the others as they are."""
    chosen = [
        index
        for index, (request, wants) in enumerate(zip(requests, wanted, strict=True))
        if wants and _is_auto(request.source_lang)
    ]
    if not chosen:
        return requests
    hints = await source_hints(api, tenant, [requests[index].text for index in chosen])
    hinted = list(requests)
    for index in chosen:
        hinted[index] = dataclasses.replace(requests[index], source_hints=hints)
    return hinted


def _is_auto(source_lang: object) -> bool:
    """Whether ``source_lang`` asks for detection (``auto`` in any case); a bad code is the job's check's to refuse."""
    try:
        return normalize_source_language(source_lang) == AUTO_LANGUAGE
    except ValueError:
        return False

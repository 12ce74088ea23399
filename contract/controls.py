"""Per-job translation controls: a glossary, context, formality and source-language detection.

They travel on the wire with the job (``glossary``, ``context``, ``formality``, ``memory`` in the
payload; ``source_lang`` may be ``"auto"``), are validated at submit and again by the worker, and
reach the prompt through the model's profile (a profile that cannot honour one fails the job
with :class:`~contract.errors.UnsupportedControlError`, naming the control).
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum

from contract.errors import InvalidGlossaryError, InvalidJobError, shown

AUTO_LANGUAGE = "auto"
"""``source_lang`` value asking the worker to detect the source language (stored on the row)."""

MAX_GLOSSARY_TERMS = 200
"""Most glossary entries a job may carry (each one lengthens the prompt)."""

MAX_TERM_BYTES = 1_024
"""Longest glossary term, source or target, in UTF-8 bytes (DeepL's limit: a glossary it takes, a job takes)."""

MAX_CONTEXT_CHARS = 4_000
"""Longest context text a job may carry."""


class Formality(StrEnum):
    """The register a translation should use, where the target language and the profile know one."""

    FORMAL = "formal"
    INFORMAL = "informal"


class Control(StrEnum):
    """A per-job control a profile may or may not support."""

    GLOSSARY = "glossary"
    CONTEXT = "context"
    FORMALITY = "formality"


def term_bytes(term: str) -> int:
    """A term's size as :data:`MAX_TERM_BYTES` counts it: its UTF-8 bytes (a lone surrogate counted as three)."""
    return len(term) if term.isascii() else len(term.encode("utf-8", "surrogatepass"))


def validate_glossary(glossary: object) -> dict[str, str]:
    """Return ``glossary`` (source term -> target term) if valid; raise :class:`InvalidGlossaryError` with the reason.

    ``None`` is an empty glossary. Terms are trimmed; an empty term, a non-string, a term over
    :data:`MAX_TERM_BYTES` (UTF-8) or more than :data:`MAX_GLOSSARY_TERMS` entries is refused.
    """
    if glossary is None:
        return {}
    if not isinstance(glossary, dict):
        raise InvalidGlossaryError(
            f"glossary must be an object of source term -> target term, got {type(glossary).__name__}"
        )
    if len(glossary) > MAX_GLOSSARY_TERMS:
        raise InvalidGlossaryError(
            f"glossary has {len(glossary):,} terms; at most {MAX_GLOSSARY_TERMS} are allowed per job"
        )
    terms: dict[str, str] = {}
    for source, target in glossary.items():
        if not isinstance(source, str) or not isinstance(target, str):
            raise InvalidGlossaryError(f"glossary entry {shown(source)}: {shown(target)} must map a string to a string")
        source_term, target_term = source.strip(), target.strip()
        if not source_term or not target_term:
            raise InvalidGlossaryError(f"glossary entry {shown(source)}: {shown(target)} has an empty term")
        for term in (source_term, target_term):
            size = term_bytes(term)
            if size > MAX_TERM_BYTES:
                raise InvalidGlossaryError(
                    f"glossary term {shown(term)} is {size:,} bytes (UTF-8); at most {MAX_TERM_BYTES:,} are allowed"
                )
            if any(unicodedata.category(ch) == "Cc" and ch not in "\t" for ch in term):
                raise InvalidGlossaryError(f"glossary term {shown(term)} contains a line break or control character")
        if source_term in terms:
            raise InvalidGlossaryError(f"glossary term {shown(source_term)} is given twice")
        terms[source_term] = target_term
    return terms


def validate_context(context: object) -> str | None:
    """Return ``context`` (text the model sees but does not translate) if valid, ``None`` for none."""
    if context is None:
        return None
    if not isinstance(context, str):
        raise InvalidJobError(f"context must be a string, got {type(context).__name__}")
    if len(context) > MAX_CONTEXT_CHARS:
        raise InvalidJobError(f"context is {len(context):,} characters; at most {MAX_CONTEXT_CHARS:,} are allowed")
    return context if context.strip() else None


def validate_formality(formality: object) -> Formality | None:
    """Return ``formality`` as a :class:`Formality`; ``None`` (or ``"default"``) leaves it to the model."""
    if formality is None or formality == "default":
        return None
    try:
        return Formality(formality)  # type: ignore[arg-type]
    except ValueError:
        raise InvalidJobError(f"formality must be 'formal', 'informal' or 'default', got {shown(formality)}") from None


def validate_memory(memory: object) -> bool:
    """Return whether the translation memory may serve and store this job (default ``True``)."""
    if memory is None:
        return True
    if not isinstance(memory, bool):
        raise InvalidJobError(f"memory must be true or false, got {shown(memory)}")
    return memory


def glossary_misses(glossary: dict[str, str], source: str, translation: str) -> list[str]:
    """Source terms that occur in ``source`` whose target term is missing from ``translation``.

    Matching ignores case (Unicode case folding) and normalises both sides to NFC, so a client
    can flag the translations that did not use the terms it asked for.
    """
    if not glossary:
        return []
    folded_source = _folded(source)
    folded_translation = _folded(translation)
    return [
        term
        for term, target in glossary.items()
        if _folded(term) in folded_source and _folded(target) not in folded_translation
    ]


def _folded(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()

"""DeepL's language codes, formality and model types, mapped onto dragoman's BCP-47 codes and formality control.

DeepL names languages in upper case with its own variants (``EN-US``, ``PT-BR``, ``ZH-HANS``); dragoman
takes BCP-47 (``en-US``, ``pt-BR``, ``zh-Hans``). Any code :func:`contract.languages.normalize_language`
accepts is taken, so a DeepL client may ask for a language DeepL itself lacks; ``/v2/languages`` lists
DeepL's own set, which is what DeepL clients offer their users. A detected language is answered as
DeepL does: the base language in upper case (``EN``, ``ZH``), and Norwegian as ``NB`` (the detector's ``no``:
DeepL's Norwegian is Bokmål, and it has no ``NO``).
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.controls import Formality
from contract.errors import InvalidJobError, UnsupportedLanguageError
from contract.languages import normalize_language


@dataclass(frozen=True, slots=True)
class DeepLLanguage:
    """One language as ``/v2/languages`` lists it."""

    code: str
    name: str
    supports_formality: bool = False


SOURCE_LANGUAGES: tuple[DeepLLanguage, ...] = tuple(
    DeepLLanguage(code, name)
    for code, name in (
        ("AR", "Arabic"),
        ("BG", "Bulgarian"),
        ("CS", "Czech"),
        ("DA", "Danish"),
        ("DE", "German"),
        ("EL", "Greek"),
        ("EN", "English"),
        ("ES", "Spanish"),
        ("ET", "Estonian"),
        ("FI", "Finnish"),
        ("FR", "French"),
        ("HE", "Hebrew"),
        ("HU", "Hungarian"),
        ("ID", "Indonesian"),
        ("IT", "Italian"),
        ("JA", "Japanese"),
        ("KO", "Korean"),
        ("LT", "Lithuanian"),
        ("LV", "Latvian"),
        ("NB", "Norwegian (Bokmål)"),
        ("NL", "Dutch"),
        ("PL", "Polish"),
        ("PT", "Portuguese"),
        ("RO", "Romanian"),
        ("RU", "Russian"),
        ("SK", "Slovak"),
        ("SL", "Slovenian"),
        ("SV", "Swedish"),
        ("TH", "Thai"),
        ("TR", "Turkish"),
        ("UK", "Ukrainian"),
        ("VI", "Vietnamese"),
        ("ZH", "Chinese"),
    )
)
"""The source languages ``/v2/languages`` lists: DeepL's own set."""

FORMALITY_TARGETS = frozenset({"DE", "FR", "IT", "ES", "NL", "PL", "PT-BR", "PT-PT", "JA", "RU"})
"""Targets DeepL lists with ``supports_formality`` (a grammatical register): ``/v2/languages`` says so of those
whose serving model can apply formality (``api.routes.deepl.languages``)."""

_REGIONAL_TARGETS = {
    "EN": (("EN-GB", "English (British)"), ("EN-US", "English (American)")),
    "PT": (("PT-BR", "Portuguese (Brazilian)"), ("PT-PT", "Portuguese (European)")),
    "ZH": (("ZH-HANS", "Chinese (simplified)"), ("ZH-HANT", "Chinese (traditional)")),
}

TARGET_LANGUAGES: tuple[DeepLLanguage, ...] = tuple(
    DeepLLanguage(code, name, code in FORMALITY_TARGETS)
    for language in SOURCE_LANGUAGES
    for code, name in _REGIONAL_TARGETS.get(language.code, ((language.code, language.name),))
)
"""The target languages ``/v2/languages?type=target`` lists: DeepL's own set, with its regional variants."""

_FORMALITY = {
    "default": None,
    "more": Formality.FORMAL,
    "prefer_more": Formality.FORMAL,
    "less": Formality.INFORMAL,
    "prefer_less": Formality.INFORMAL,
}


def to_bcp47(code: object, field: str) -> str:
    """DeepL's ``code`` (``EN-US``, ``zh-hans``, ``DE``) as dragoman's BCP-47 code (``en-US``, ``zh-Hans``, ``de``).

    :class:`~contract.errors.UnsupportedLanguageError` naming ``field`` for a code that names no language.
    """
    try:
        return normalize_language(code)
    except UnsupportedLanguageError as exc:
        raise UnsupportedLanguageError(f"Value for '{field}' not supported: {exc}") from None


_DEEPL_BASE = {"NO": "NB"}
"""Base languages DeepL names otherwise: Norwegian (``no``, what the detector finds) is DeepL's ``NB``."""

MODEL_TYPES = {
    "quality_optimized": "quality_optimized",
    "prefer_quality_optimized": "quality_optimized",
    "latency_optimized": "latency_optimized",
}
"""DeepL's ``model_type`` values and the ``model_type_used`` each is answered with: dragoman has one model per
route, which serves every type; a preference is answered as the type it prefers, as DeepL answers it."""


def to_deepl(code: str) -> str:
    """A BCP-47 code as DeepL answers a detected language: the base language, upper case (``zh-Hans`` -> ``ZH``;
    ``no`` -> ``NB``)."""
    base = code.split("-", 1)[0].upper()
    return _DEEPL_BASE.get(base, base)


def model_type_used(value: object) -> str | None:
    """The ``model_type_used`` answered for DeepL's ``model_type`` ``value`` (``None``: none was sent, none is
    answered); an :class:`~contract.errors.InvalidJobError` naming the values for any other."""
    if value is None:
        return None
    used = MODEL_TYPES.get(str(value).lower())
    if used is None:
        raise InvalidJobError(f"Value for 'model_type' not supported: {value!r}; use one of {', '.join(MODEL_TYPES)}")
    return used


def base_language(code: str) -> str:
    """The base language of a BCP-47 code, lower case (``en-US`` -> ``en``): what a glossary's pair is keyed by."""
    return code.split("-", 1)[0].lower()


def to_formality(value: object) -> Formality | None:
    """DeepL's ``formality`` (``default``, ``more``, ``less``, ``prefer_more``, ``prefer_less``) as dragoman's control.

    ``None`` (absent) and ``default`` leave the register to the model; anything else is an
    :class:`~contract.errors.InvalidJobError` naming the values.
    """
    if value is None:
        return None
    key = str(value).lower()
    if key not in _FORMALITY:
        raise InvalidJobError(f"Value for 'formality' not supported: {value!r}; use one of {', '.join(_FORMALITY)}")
    return _FORMALITY[key]

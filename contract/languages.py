"""Language codes: validate and normalise BCP-47 / ISO 639 tags, and name them for prompts."""

from __future__ import annotations

from functools import lru_cache

import langcodes

from contract.errors import UnsupportedLanguageError, shown

# Valid tags that name no language a text can be translated into or out of.
_NOT_A_LANGUAGE = frozenset({"und", "mul", "mis", "zxx"})


_MAX_TAG_CHARS = 100  # far longer than any tag langcodes accepts

LISTED_LANGUAGES: tuple[str, ...] = (
    *("ar", "az", "bg", "bn", "ca", "cs", "da", "de", "el", "en", "eo", "es", "et", "eu", "fa", "fi", "fr"),
    *("ga", "gl", "he", "hi", "hu", "id", "it", "ja", "ko", "ky", "lt", "lv", "ms", "nb", "nl", "pl", "pt"),
    *("pt-BR", "ro", "ru", "sk", "sl", "sq", "sr", "sv", "th", "tl", "tr", "uk", "ur", "vi", "zh", "zh-Hant"),
)
"""The languages a door lists as translated when the deployment names none (``DRAGOMAN_API_LANGUAGES``): those
LibreTranslate itself lists, which hold every language of DeepL's list too; all living languages the translation
models dragoman serves were trained on. Any other code is still taken; a list is what clients offer their users."""


def normalize_language(code: object) -> str:
    """Return the canonical BCP-47 form of ``code`` ("EN" -> "en", "eng" -> "en", "pt_br" -> "pt-BR").

    Raises :class:`UnsupportedLanguageError` for anything that is not a registered language,
    whatever its type: the type and length are checked before the cached lookup (a list from a
    wire entry cannot be hashed; a megabyte string should not be cached).
    """
    if not isinstance(code, str) or not code.strip():
        raise UnsupportedLanguageError(
            f"language code {shown(code)} is empty or not a string; use a BCP-47 / ISO 639 code such as 'en' or 'pt-BR'"
        )
    if len(code) > _MAX_TAG_CHARS:
        raise UnsupportedLanguageError(f"language code {shown(code)} is too long to be one ({len(code):,} characters)")
    return _normalize(code)


@lru_cache(maxsize=4096)
def _normalize(code: str) -> str:
    tag = code.strip().replace("_", "-")
    try:
        valid = langcodes.tag_is_valid(tag)
        canonical = langcodes.standardize_tag(tag) if valid else ""
    except ValueError:  # langcodes.LanguageTagError is one
        valid, canonical = False, ""
    language = canonical.split("-", 1)[0].lower()
    if not valid or language in _NOT_A_LANGUAGE or "qaa" <= language <= "qtz":
        raise UnsupportedLanguageError(
            f"unknown language code {shown(code)}; use a BCP-47 / ISO 639 code such as 'en', 'fr', 'zh-Hans' or 'pt-BR'"
        )
    return canonical


@lru_cache(maxsize=1024)
def language_name(code: str) -> str:
    """English display name of a normalised code ("fr" -> "French", "pt-BR" -> "Portuguese (Brazil)")."""
    return str(langcodes.Language.get(code).display_name("en"))

"""Language codes are validated and normalised before anything is written."""

from __future__ import annotations

import pytest

from contract.errors import UnsupportedLanguageError
from contract.languages import language_name, normalize_language


@pytest.mark.parametrize(
    ("code", "canonical"),
    [
        ("en", "en"),
        ("EN", "en"),
        (" fr ", "fr"),
        ("eng", "en"),
        ("jpn", "ja"),
        ("en_US", "en-US"),
        ("pt-br", "pt-BR"),
        ("zh-hans", "zh-Hans"),
        ("iw", "he"),
        ("sr-Latn", "sr-Latn"),
    ],
)
def test_codes_are_normalised(code: str, canonical: str) -> None:
    assert normalize_language(code) == canonical


@pytest.mark.parametrize("code", ["", "   ", "xx", "zz", "123", "klingon", "und", "mul", "zxx", "qaa", "en-", "e"])
def test_unknown_codes_are_rejected(code: str) -> None:
    with pytest.raises(UnsupportedLanguageError, match="BCP-47"):
        normalize_language(code)


def test_names_for_prompts() -> None:
    assert language_name("fr") == "French"
    assert language_name("pt-BR") == "Portuguese (Brazil)"
    assert language_name("zh-Hans") == "Chinese (Simplified)"

"""DeepL's language codes and formality values on dragoman's BCP-47 codes and formality control."""

from __future__ import annotations

import pytest

from api.deepl_languages import (
    SOURCE_LANGUAGES,
    TARGET_LANGUAGES,
    base_language,
    to_bcp47,
    to_deepl,
    to_formality,
)
from contract.controls import Formality
from contract.errors import InvalidJobError, UnsupportedLanguageError


@pytest.mark.parametrize(
    ("deepl", "bcp47"),
    [
        ("DE", "de"),
        ("EN-US", "en-US"),
        ("EN-GB", "en-GB"),
        ("PT-BR", "pt-BR"),
        ("PT-PT", "pt-PT"),
        ("ZH-HANS", "zh-Hans"),
        ("ZH-HANT", "zh-Hant"),
        ("zh-hans", "zh-Hans"),
        ("NB", "nb"),
    ],
)
def test_deepl_codes_map_to_bcp47(deepl: str, bcp47: str) -> None:
    assert to_bcp47(deepl, "target_lang") == bcp47


def test_an_unknown_code_is_refused_naming_the_field() -> None:
    with pytest.raises(UnsupportedLanguageError, match=r"'target_lang' not supported.*unknown language code 'XX'"):
        to_bcp47("XX", "target_lang")


@pytest.mark.parametrize(("bcp47", "deepl"), [("en", "EN"), ("en-US", "EN"), ("zh-Hans", "ZH"), ("pt-BR", "PT")])
def test_a_detected_language_is_answered_as_deepl_does(bcp47: str, deepl: str) -> None:
    assert to_deepl(bcp47) == deepl


def test_a_glossary_pair_is_keyed_by_base_language() -> None:
    assert base_language("en-GB") == "en" and base_language("zh-Hant") == "zh" and base_language("de") == "de"


@pytest.mark.parametrize(
    ("value", "formality"),
    [
        (None, None),
        ("default", None),
        ("more", Formality.FORMAL),
        ("prefer_more", Formality.FORMAL),
        ("less", Formality.INFORMAL),
        ("PREFER_LESS", Formality.INFORMAL),
    ],
)
def test_formality_values_map_to_the_control(value: str | None, formality: Formality | None) -> None:
    assert to_formality(value) == formality


def test_an_unknown_formality_names_the_values() -> None:
    with pytest.raises(InvalidJobError, match="prefer_more"):
        to_formality("very")


def test_the_lists_have_deepl_s_regional_targets_and_formality() -> None:
    sources = {language.code for language in SOURCE_LANGUAGES}
    targets = {language.code: language for language in TARGET_LANGUAGES}
    assert {"EN", "PT", "ZH", "DE"} <= sources
    assert {"EN-US", "EN-GB", "PT-BR", "PT-PT", "ZH-HANS", "ZH-HANT"} <= set(targets)
    assert not {"EN", "PT"} & set(targets)  # DeepL's deprecated bare targets are not listed
    assert targets["DE"].supports_formality and not targets["EN-US"].supports_formality
    for code in [*sources, *targets]:  # every listed code is one dragoman takes
        to_bcp47(code, "target_lang")

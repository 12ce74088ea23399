"""source_lang auto: what counts as a detection, and what is refused with the reason."""

from __future__ import annotations

import pytest

from contract.errors import LanguageNotDetectedError
from contract.language_detection import LanguageDetector


@pytest.fixture(scope="module")
def detector() -> LanguageDetector:
    return LanguageDetector()


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Bonjour tout le monde, comment allez-vous aujourd'hui ?", "fr"),  # confident
        ("Der Hund schläft.", "de"),
        ("こんにちは", "ja"),
        ("The cat sleeps.", "en"),  # 32%, but ten times the next language
        ("Le chat dort.", "fr"),
    ],
)
def test_detected(detector: LanguageDetector, text: str, language: str) -> None:
    assert detector.detect(text) == language


@pytest.mark.parametrize(
    ("text", "guess"),
    [
        ("Спасибо", "uz (Uzbek) at 23%"),  # a wrong best guess, barely ahead of Russian: refused
        ("Bonjour", "fr (French) at 15%"),
        ("12345 67890", "zxx at 10%"),  # no language at all
        ("Hello", "br (Breton)"),
    ],
)
def test_refused_with_the_guess_and_what_to_do(detector: LanguageDetector, text: str, guess: str) -> None:
    with pytest.raises(LanguageNotDetectedError) as caught:
        detector.detect(text)
    assert guess in str(caught.value) and "set to its language code" in str(caught.value)


def test_a_stricter_threshold_still_takes_a_clear_lead(detector: LanguageDetector) -> None:
    strict = LanguageDetector(min_confidence=0.99)
    assert strict.detect("The cat sleeps.") == "en"
    with pytest.raises(LanguageNotDetectedError, match="needs 99%"):
        strict.detect("Buenos días")


def test_ranked_gives_the_likeliest_languages_once_each(detector: LanguageDetector) -> None:
    ranked = detector.ranked("Guten Morgen, wie geht es Ihnen heute? Wir fahren mit dem Zug nach Berlin.", limit=3)
    assert ranked[0][0] == "de" and ranked[0][1] > 0.9
    assert len(ranked) == 3 and len({code for code, _ in ranked}) == 3
    assert [p for _, p in ranked] == sorted((p for _, p in ranked), reverse=True)


def test_languages_are_canonical_codes_without_non_languages(detector: LanguageDetector) -> None:
    languages = detector.languages()
    assert {"en", "fr", "de", "zh", "ja", "fil"} <= set(languages)  # py3langid's "tl" is canonical "fil"
    assert "zxx" not in languages and "tl" not in languages and languages == sorted(set(languages))

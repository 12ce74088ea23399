"""source_lang auto: what counts as a detection, what is refused with the reason, and the best guess that never is."""

from __future__ import annotations

import pytest

from contract.errors import InvalidJobError, LanguageNotDetectedError
from contract.language_detection import (
    Guess,
    GuessBasis,
    LanguageDetector,
    choose_language,
    validate_source_hints,
)


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


# --- Best guesses (issue 49): never a refusal, helped by source hints ------------------------------------------------


def test_a_text_the_detector_is_sure_of_keeps_its_language_whatever_the_hints(detector: LanguageDetector) -> None:
    guess = detector.best_guess("Der Hund schläft.", ["en", "fr"])
    assert (guess.language, guess.basis) == ("de", GuessBasis.TEXT)


def test_a_short_text_takes_the_first_hint_it_does_not_rule_out(detector: LanguageDetector) -> None:
    # py3langid ranks "Save" Breton first at 2%, English at 1.6%: the strict detection refuses it
    with pytest.raises(LanguageNotDetectedError):
        detector.detect("Save")
    assert detector.best_guess("Save", ["en"]) == Guess("en", pytest.approx(0.0155, abs=0.005), GuessBasis.HINT)
    assert detector.best_guess("Hallo", ["de", "en"]).language == "de"
    assert detector.best_guess("Hallo", ["en", "de"]).language == "en"


def test_the_probability_of_any_language_for_a_text(detector: LanguageDetector) -> None:
    assert detector.probability("Save", "en") == pytest.approx(0.0155, abs=0.005)  # far below the first five
    assert detector.probability("Einstellungen", "de") > 0.5
    assert detector.probability("Save", "tlh") == 0.0  # not a language the detector knows


def test_a_hint_in_another_script_is_ruled_out(detector: LanguageDetector) -> None:
    guess = detector.best_guess("Привет", ["en", "fr"])
    assert guess.basis is GuessBasis.GUESS and guess.language in {"ru", "sr", "bg", "mk", "uk"}
    assert detector.best_guess("Привет", ["en", "ru"]) == Guess("ru", pytest.approx(0.15, abs=0.05), GuessBasis.HINT)


def test_the_chain_in_order_request_then_recent_then_default() -> None:
    """choose_language on a ranking that rules out nothing: the first hint wins; a ruled-out hint is skipped."""
    unsure = [("it", 0.04), ("es", 0.03), ("en", 0.02), ("ru", 0.001)]
    assert choose_language(unsure, ["es", "en"]) == Guess("es", 0.03, GuessBasis.HINT)  # the request's language
    assert choose_language(unsure, ["en"]).language == "en"  # no request language, no recent one: the default
    # a hint the text makes ten times less likely than its best guess is passed over for the next one
    assert choose_language(unsure, ["ru", "en"]).language == "en"
    assert choose_language(unsure, ["ru"]) == Guess("it", 0.04, GuessBasis.GUESS)  # none fits: the best guess
    assert choose_language([("fr", 0.9), ("it", 0.01)], ["en"]) == Guess("fr", 0.9, GuessBasis.TEXT)


def test_no_language_at_all_takes_the_first_hint() -> None:
    assert choose_language([(None, 0.3), ("en", 0.01)], ["de", "en"]) == Guess("de", 0.0, GuessBasis.HINT)
    with pytest.raises(ValueError, match="at least one source hint"):
        choose_language([("en", 0.9)], [])


def test_digits_and_symbols_are_never_refused_with_hints(detector: LanguageDetector) -> None:
    for text in ("12345 67890", "🙂", "OK", "…"):
        assert detector.best_guess(text, ["en"]).language


def test_source_hints_are_checked_and_made_canonical() -> None:
    assert validate_source_hints(["EN", "pt_BR", "en"]) == ("en", "pt-BR")
    assert validate_source_hints(None) == ()
    for bad, message in (("en", "a list"), (["en"] * 9, "at most 8"), (["en", "xx-zz-qq"], "not a language code")):
        with pytest.raises(InvalidJobError, match=message):
            validate_source_hints(bad)

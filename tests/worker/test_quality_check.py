"""Each quality check from its smallest input: what it flags, with what evidence, and what it must leave alone."""

from __future__ import annotations

import pytest

from contract.language_detection import LanguageDetector
from contract.schemas import JobSpec
from worker.quality_check import (
    check_translation,
    glossary,
    length_ratio,
    numbers,
    placeholders,
    repetition,
    tags,
    untranslated,
    wrong_language,
)


class FixedGuess:
    """A detector that always answers the same (the check's logic, without py3langid)."""

    def __init__(self, language: str | None, probability: float) -> None:
        self.answer = (language, probability)
        self.texts: list[str] = []

    def guess(self, text: str) -> tuple[str | None, float]:
        self.texts.append(text)
        return self.answer


@pytest.fixture(scope="module")
def detector() -> LanguageDetector:
    return LanguageDetector()


def _spec(text: str, source: str = "en", target: str = "fr", **fields: object) -> JobSpec:
    return JobSpec(job_id="j", text=text, source_lang=source, target_lang=target, created_at=0.0, **fields)  # type: ignore[arg-type]


# wrong_language ---------------------------------------------------------------------------------


def test_wrong_language_flags_a_confident_other_language() -> None:
    evidence = wrong_language("Die Datei konnte nicht geöffnet werden.", "fr", FixedGuess("de", 0.99))
    assert evidence == "the output reads as de (99% sure), not fr"


def test_wrong_language_trusts_the_target_a_sibling_and_an_unsure_detector() -> None:
    text = "Filen kunne ikke åbnes, fordi disken er fuld."
    assert wrong_language(text, "fr", FixedGuess("fr", 0.99)) is None
    assert wrong_language(text, "fr-CA", FixedGuess("fr", 0.99)) is None
    assert wrong_language(text, "nb", FixedGuess("da", 0.99)) is None
    assert wrong_language(text, "fr", FixedGuess("de", 0.6)) is None
    assert wrong_language(text, "fr", FixedGuess(None, 0.99)) is None


def test_wrong_language_does_not_judge_short_outputs_or_code() -> None:
    guess = FixedGuess("en", 0.99)
    assert wrong_language("Firefox", "fr", guess) is None
    assert wrong_language("%s: {name} <b>https://example.com/a/long/path/to/something</b>", "fr", guess) is None
    assert guess.texts == []


def test_wrong_language_reads_only_the_prose(detector: LanguageDetector) -> None:
    guess = FixedGuess("fr", 0.99)
    wrong_language("Ouvrir %s depuis https://example.com/fichier et <b>enregistrer</b> le document", "fr", guess)
    assert "%s" not in guess.texts[0] and "https" not in guess.texts[0] and "<b>" not in guess.texts[0]


def test_wrong_language_with_the_real_detector(detector: LanguageDetector) -> None:
    assert wrong_language("Le fichier n'a pas pu être ouvert car le disque est plein.", "fr", detector) is None
    evidence = wrong_language("The file could not be opened because the disk is full.", "fr", detector)
    assert evidence is not None and evidence.startswith("the output reads as en")


# untranslated -----------------------------------------------------------------------------------


def test_untranslated_flags_the_source_copied_back() -> None:
    evidence = untranslated("The file could not be opened.", "The file could not be opened.", "en", "fr")
    assert evidence == "the output is the source's own words (6 of 6, 100%)"


@pytest.mark.parametrize("output", ["", "  \n"])
def test_an_empty_translation_of_words_is_untranslated_whatever_the_languages(output: str) -> None:
    assert untranslated("Package files:", output, "en", "fr") == "the translation is empty"
    assert untranslated("Package files:", output, "en", "en-GB") == "the translation is empty"
    assert untranslated("42 %s", output, "en", "fr") is None  # nothing to translate


@pytest.mark.parametrize(
    ("source", "output", "pair"),
    [
        ("The file could not be opened.", "Le fichier n'a pas pu être ouvert.", ("en", "fr")),
        ("Open file", "Open file", ("en", "fr")),  # too short to tell
        ("John Smith Company", "John Smith Company", ("en", "fr")),  # a name
        ("Mozilla Firefox Web Browser", "Mozilla Firefox Web Browser", ("en", "de")),  # a title
        ("config_path user.name getValue()", "config_path user.name getValue()", ("en", "fr")),  # code
        ("  --full-time  like -l --time-style=full-iso", "  --full-time  comme -l --time-style=full-iso", ("en", "fr")),
        ("The file could not be opened.", "The file could not be opened.", ("en", "en-GB")),  # same language
    ],
)
def test_untranslated_leaves_alone(source: str, output: str, pair: tuple[str, str]) -> None:
    assert untranslated(source, output, *pair) is None


# length_ratio -----------------------------------------------------------------------------------


def test_length_ratio_flags_an_output_far_too_long_or_short() -> None:
    source = "Save the document before closing the window."
    assert length_ratio(source, source * 4, "en", "fr") == (
        "the output is 4.00x as long as the source "
        "(expected 0.33-3x, Han, Hangul and kana characters weighed by their density)"
    )
    assert length_ratio(source, "Sauver.", "en", "fr") is not None


def test_length_ratio_knows_dense_scripts_and_short_sources() -> None:
    assert length_ratio("Save the document before closing the window.", "关闭窗口前保存文档。", "en", "zh") is None
    assert length_ratio("OK", "D'accord, c'est entendu", "en", "fr") is None
    mixed = "Too many fds open.  Cannot use select on a fd >= %d"
    assert (
        length_ratio(
            mixed,
            "オープンしているファイルディスクリプタが多過ぎます。%d 個以上の fd に select() が使えません。",
            "en",
            "ja",
        )
        is None
    )
    assert length_ratio(mixed, "多", "en", "ja") is not None


# numbers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        "Total : 1 000,50 EUR pour 3 articles le 05/01/2024",
        "Total : 1.000,50 EUR pour trois articles le 5 janvier 2024",
        "Total : 1\u202f000,50 EUR pour 3 articles, 2024-01-05",
    ],
)
def test_numbers_tolerate_locale_formats_and_spelled_small_numbers(output: str) -> None:
    assert numbers("Total: 1,000.50 EUR for 3 items on 2024-01-05", output) is None


def test_numbers_flag_a_missing_or_changed_number() -> None:
    assert numbers("Total: 1,000.50 EUR", "Total : 100,50 EUR") == (
        "source number 1,000.50 missing from the output (it has 100,50 instead)"
    )
    assert numbers("Room 42 and room 17", "Salle 42") == "source number 17 missing from the output"


def test_numbers_a_space_may_group_digits_or_separate_numbers() -> None:
    assert numbers("Pay 25 200 times", "Payez 25 fois 200") is None
    assert numbers("Pay 25 and 200", "Payez 25 200") is None
    assert numbers("Pay 1,000 now", "Payez 1 000 maintenant") is None


def test_numbers_ignore_placeholders_urls_and_a_numberless_source() -> None:
    assert numbers("%1$s of %2$s at https://example.com/v12", "%2$s sur %1$s") is None
    assert numbers("No numbers here", "Pas de chiffres 12") is None


# placeholders and tags --------------------------------------------------------------------------


def test_placeholders_missing_and_invented() -> None:
    assert placeholders("Hello %s, {count} new", "Bonjour, {nombre} nouveaux") == (
        "placeholders missing %s, {count}; invented {nombre}"
    )
    assert placeholders("%1$s to %2$s", "%2$s vers %1$s") is None
    assert placeholders("50% off", "50 % de remise") is None


def test_tags_compare_html_tag_names_not_attributes() -> None:
    assert (
        tags(
            'Click <a href="/x" title="Open">here</a>', 'Cliquez <a href="/x" title="Ouvrir">ici</a>', inline_tags=False
        )
        is None
    )
    assert tags("A <b>bold</b> move", "Un geste <b>audacieux", inline_tags=False) == "markup tags missing /b"
    assert tags("Plain", "<i>Simple</i>", inline_tags=False) == "markup tags invented /i, i"
    assert tags("--debug=<octal> or <newline>", "--debug=<8進数> または <改行>", inline_tags=False) is None


def test_tags_of_a_document_segment_use_its_placeholder_tags() -> None:
    assert tags("Click <x1>here</x1><x2/>", "Cliquez <x1>ici</x1><x2/>", inline_tags=True) is None
    assert tags("Click <x1>here</x1><x2/>", "Cliquez ici<x2/>", inline_tags=True) == (
        "placeholder tags changed: missing <x1>, </x1>"
    )


# glossary and repetition ------------------------------------------------------------------------


def test_glossary_names_the_terms_not_used() -> None:
    terms = {"Save": "Enregistrer", "Cancel": "Annuler"}
    assert glossary(terms, "Use the Save button", "Utilisez le bouton Sauver") == (
        "glossary terms not used: 'Save' -> 'Enregistrer'"
    )
    assert glossary(terms, "Use the Save button", "Utilisez le bouton Enregistrer") is None
    assert glossary({}, "Use the Save button", "Utilisez le bouton") is None


def test_repetition_flags_a_looping_tail_the_source_has_not() -> None:
    looping = "Traduisez cette phrase " + "la la la " * 10
    assert repetition("Translate this sentence", looping) == "the output ends in 'la' repeated 30 times"
    assert repetition("Translate this sentence", "Traduisez cette phrase la la la") is None
    song = "na " * 20
    assert repetition(song, song) is None


def test_repetition_in_a_script_without_spaces() -> None:
    assert repetition("Save the file", "保存文件" + "的的的的" * 12) is not None


# all together -----------------------------------------------------------------------------------


def test_a_good_translation_is_clean(detector: LanguageDetector) -> None:
    spec = _spec("Hello %s, you have {count} <b>new</b> messages since 2024.", glossary={"messages": "messages"})
    assert (
        check_translation(spec, "Bonjour %s, vous avez {count} <b>nouveaux</b> messages depuis 2024.", detector) == {}
    )


def test_several_flags_at_once_keyed_by_flag_name() -> None:
    spec = _spec("Use Save for %s and <b>2024</b> files, please do it now", glossary={"Save": "Enregistrer"})
    output = "Use Save for and files, please do it now " + "now " * 30
    flags = check_translation(spec, output, FixedGuess("en", 0.99))
    assert set(flags) == {
        "wrong_language",
        "numbers",
        "placeholders",
        "tags",
        "glossary",
        "repetition",
    }


def test_no_detector_no_language_flag() -> None:
    flags = check_translation(_spec("The file could not be opened now."), "The file could not be opened now.", None)
    assert set(flags) == {"untranslated"}

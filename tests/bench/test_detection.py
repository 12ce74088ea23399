"""bench.detection and bench.ui_strings: the labelled sample, the cleaning of catalogue strings, one detector's row."""

from __future__ import annotations

from collections import Counter

from bench.detection import guess_table, measure_one, read_sample, same, table
from bench.ui_strings import LANGUAGES, cleaned


def test_the_sample_is_thirty_short_strings_of_twenty_languages() -> None:
    rows = read_sample()
    assert Counter(language for language, _, _ in rows) == dict.fromkeys(LANGUAGES, 30)
    assert all(1 <= len(text.split()) <= 4 for _, _, text in rows)


def test_catalogue_strings_are_cleaned_as_a_user_sees_them() -> None:
    assert cleaned("_Save") == "Save"
    assert cleaned("Save _As…") == "Save As"
    assert cleaned("&Open:") == "Open"
    assert cleaned("ファイルを保存(_S)") == "ファイルを保存"
    for unusable in ("%s files", "<b>Bold</b>", "/usr/bin", "Page 3", "OK", "one two three four five"):
        assert cleaned(unusable) is None


def test_a_detector_row_and_the_best_guess_rows() -> None:
    rows = [row for row in read_sample() if row[0] in ("en", "de", "ru")][:60]
    result = measure_one("py3langid", rows, rounds=1)
    assert result["strings"] == 60 and 0 < result["top1"] <= 60 and result["sure_right"] <= result["sure"]
    guesses = result["best_guess"]
    assert set(guesses) == {"alone", "request", "recent-right", "recent-wrong"}
    # the key's own recent language is right at least as often as the string alone
    assert sum(guesses["recent-right"].values()) >= sum(guesses["alone"].values())
    assert "| py3langid |" in table([result]) and "| py3langid |" in guess_table([result])
    assert same("no", "nb") and same("pt-BR", "pt") and not same("nn", "nb") and not same(None, "en")

"""DeepL's glossary entry formats: TSV and CSV parsed with every bad line named; the terms one text needs."""

from __future__ import annotations

import pytest

from api.deepl_glossary_entries import GlossaryEntriesError, glossary_name, parse_entries, terms_in, to_tsv
from contract.controls import MAX_GLOSSARY_TERMS
from contract.errors import InvalidJobError


def test_tsv_entries_are_trimmed_kept_in_order_and_blank_lines_skipped() -> None:
    text = "zebra\tZebra\n\n  apple \t Apfel \r\nhouse\tHaus\n"
    entries = parse_entries(text, "tsv")
    assert entries == [("zebra", "Zebra"), ("apple", "Apfel"), ("house", "Haus")]
    assert parse_entries(to_tsv(entries), "tsv") == entries


def test_csv_entries_take_quotes_and_deepl_s_language_columns() -> None:
    text = 'hello,Hallo\n"one, two","eins, zwei",en,de\n'
    assert parse_entries(text, "csv") == [("hello", "Hallo"), ("one, two", "eins, zwei")]


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("a\tb\na\tc", "tsv", "line 2: source term 'a' is given twice"),
        ("a\tb\n\tc", "tsv", "line 2: the source term is empty"),
        ("a\t  ", "tsv", "line 1: the target term is empty"),
        ("a\tb\tc", "tsv", "line 1: a term contains a tab"),
        ("a\tb\nno separator", "tsv", "line 2: expected a source and a target term separated by a tab"),
        ("a,b,c", "csv", "line 1: expected a source and a target term separated by a comma"),
        ("a\x07b\tc", "tsv", "line 1: the source term .* contains a control character"),
        ("a\t" + "x" * 1_025, "tsv", "line 1: the target term is 1,025 bytes"),
        ("a\t" + "ü" * 513, "tsv", "line 1: the target term is 1,026 bytes"),
        ("\n\n", "tsv", "no entries"),
        ("a\tb", "xlsx", "entries_format"),
    ],
)
def test_bad_entries_are_refused_naming_the_line(text: str, fmt: str, message: str) -> None:
    with pytest.raises(GlossaryEntriesError, match=message):
        parse_entries(text, fmt)


def test_a_text_carries_only_the_terms_it_contains() -> None:
    entries = [("Cat", "Katze"), ("dog", "Hund"), ("ÉCOLE", "Schule")]
    assert terms_in(entries, "A cat and an école.") == {"Cat": "Katze", "ÉCOLE": "Schule"}
    assert terms_in(entries, "Nothing here.") == {}


def test_past_the_per_job_limit_the_longest_terms_are_kept() -> None:
    entries = [(f"t{n:04d}" + "x" * (n % 7), str(n)) for n in range(MAX_GLOSSARY_TERMS + 50)]
    text = " ".join(source for source, _ in entries)
    kept = terms_in(entries, text)
    assert len(kept) == MAX_GLOSSARY_TERMS
    assert min(len(term) for term in kept) >= max(len(s) for s, _ in entries if s not in kept)


@pytest.mark.parametrize(
    ("name", "message"),
    [("  ", "must not be empty"), ("x" * 1025, "1,025 bytes"), ("é" * 513, "1,026 bytes"), ("a\x00b", "NUL character")],
)
def test_a_glossary_name_must_be_storable(name: str, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        glossary_name(name)
    assert glossary_name("Product terms (DE)") == "Product terms (DE)"

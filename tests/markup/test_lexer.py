"""The markup lexer: what each stretch is, what stays text, and one pass over any text, however hostile."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator

import pytest

from markup.finder import Finder
from markup.lexer import Kind, Markup, attributes, markup

RAW_TEXT = frozenset({"script", "style"})


def spans(source: str, raw_text: frozenset[str] = frozenset()) -> list[tuple[str, Kind, str]]:
    """Each stretch of markup as (its text, its kind, its name)."""
    return [(source[m.start : m.end], m.kind, m.name) for m in markup(source, raw_text)]


def test_every_kind_of_markup_is_found_with_its_name() -> None:
    source = (
        '<?xml version="1.0"?><!DOCTYPE html><p class=a>One <!-- c --><![CDATA[<b>]]>'
        "<a href=\"/x?a>b\" title='x'>two</a><br/></p>"
    )
    assert spans(source) == [
        ('<?xml version="1.0"?>', Kind.INSTRUCTION, ""),
        ("<!DOCTYPE html>", Kind.DECLARATION, ""),
        ("<p class=a>", Kind.START, "p"),
        ("<!-- c -->", Kind.COMMENT, ""),
        ("<![CDATA[<b>]]>", Kind.CDATA, ""),
        ("<a href=\"/x?a>b\" title='x'>", Kind.START, "a"),  # a quoted '>' ends nothing
        ("</a>", Kind.END, "a"),
        ("<br/>", Kind.START, "br"),
        ("</p>", Kind.END, "p"),
    ]
    assert [m.self_closing for m in markup("<br/><br><t:b />")] == [True, False, True]


@pytest.mark.parametrize(
    "text",
    [
        "1 < 2 and 3 > 2",
        "a <- b",
        "<!-- never closed and no bracket after",
        "<![CDATA[ never closed",
        "<?php never closed",
        '<a href="never closed>',
        "</",
        "<",
        "<1a>",
    ],
)
def test_a_lt_that_opens_nothing_closed_is_text(text: str) -> None:
    assert spans(text) == []


def test_an_unclosed_comment_runs_to_the_next_bracket_as_a_declaration() -> None:
    assert spans("a <!-- b > c") == [("<!-- b >", Kind.DECLARATION, "")]


def test_the_content_of_a_raw_text_element_is_text_up_to_its_own_end_tag() -> None:
    source = "<SCRIPT>if (a<b) x('</scripts>')</Script >after<b>"
    assert spans(source, RAW_TEXT) == [
        ("<SCRIPT>", Kind.START, "SCRIPT"),
        ("</Script >", Kind.END, "Script"),
        ("<b>", Kind.START, "b"),
    ]
    assert spans("<script/>a<b>", RAW_TEXT) == [("<script/>", Kind.START, "script"), ("<b>", Kind.START, "b")]
    assert spans("<style>never closed <b>", RAW_TEXT) == [("<style>", Kind.START, "style")]
    assert spans(source)[1][2] == "b)"  # without raw text, "<b) x('</scripts>')</Script >" reads as one tag


def test_attributes_are_read_unquoted_and_named_in_lower_case() -> None:
    assert attributes("<SPAN Translate=no class='a notranslate' data-x=\"1>2\" hidden>") == {
        "translate": "no",
        "class": "a notranslate",
        "data-x": "1>2",
        "hidden": "",
    }
    assert attributes("<br/>") == {}
    assert attributes("<a b=1 b=2>") == {"b": "1"}


HOSTILE = [
    "<!--" * 2_500,
    "<![CDATA[" * 1_111,
    "<?" * 5_000,
    "<!" * 5_000,
    "</" * 5_000,
    "<a " * 3_333,
    '<a "' * 2_500,
    "<a '\"" * 2_000,
    "<a x='>" * 1_428,
    '<a x=">' * 1_428 + "'",
    "<b>" * 3_333,
    "<script>" * 1_250,
    "<script></scrip" * 666,
    "<style><" * 1_250,
]


@pytest.fixture
def characters_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The characters the lexer's searches read, counted as they go (one number a search)."""
    read: list[int] = []
    search = Finder._search

    def counted(finder: Finder, needle: str | re.Pattern[str], start: int, end: int) -> int:
        found = search(finder, needle, start, end)
        read.append((end if found == -1 else found + 1) - start)
        return found

    monkeypatch.setattr(Finder, "_search", counted)
    yield read


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda text: repr(text[:8]))
def test_the_lexer_reads_each_character_a_few_times_at_most(hostile: str, characters_read: list[int]) -> None:
    """Linear on the texts a regular expression is quadratic on: reads and searches grow with the text, no faster."""
    for repeat, raw_text in itertools.product((1, 4), (frozenset(), RAW_TEXT)):
        text = hostile * repeat
        characters_read.clear()
        found: list[Markup] = list(markup(text, raw_text))
        assert sum(characters_read) <= 8 * len(text), f"{sum(characters_read):,} characters read for {len(text):,}"
        assert len(characters_read) <= 8 * len(text)
        assert all(a.end <= b.start for a, b in itertools.pairwise(found))


def test_random_texts_are_read_linearly_into_ordered_stretches(characters_read: list[int]) -> None:
    pieces = ["<", ">", "!--", "-->", "![CDATA[", "]]>", "?", "/", '"', "'", "a", "b ", "x=", " ", "\n", "script"]
    rng = random.Random(48)
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 400)))
        characters_read.clear()
        found = list(markup(text, rng.choice([frozenset(), RAW_TEXT])))
        assert sum(characters_read) <= 8 * len(text) + 8
        assert all(0 <= a.start < a.end <= len(text) and text[a.start] == "<" for a in found)
        assert all(a.end <= b.start for a, b in itertools.pairwise(found))
        assert all(text[a.end - 1] == ">" for a in found)

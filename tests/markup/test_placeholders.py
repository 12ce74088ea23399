"""Markup swapped for placeholder tags and put back: byte for byte, pairs nested, HTML and XML each as it reads."""

from __future__ import annotations

import random

import pytest

from contract.inline_tags import Tag, tag_problem, tokens
from markup.placeholders import HTML, MAX_PLACEHOLDERS, XML, TooMuchMarkupError, restore, to_placeholders


@pytest.mark.parametrize(
    ("text", "dialect", "untranslated", "tagged"),
    [
        ("<B>bold</b> and <b>bold</B>", HTML, frozenset(), "<x1>bold</x1> and <x2>bold</x2>"),
        ("<B>not</b> a pair in xml", XML, frozenset(), "<x1/>not<x2/> a pair in xml"),
        ("a<br>b<img src=x>c<hr/>", HTML, frozenset(), "a<x1/>b<x2/>c<x3/>"),
        ("<script>if (a<b) go()</script> then <style>p{}</style>", HTML, frozenset(), "<x1/> then <x2/>"),
        ("<script>kept in xml</script>", XML, frozenset(), "<x1>kept in xml</x1>"),
        ("<p translate='no'>Acme</p> <p TRANSLATE=NO>Acme</p>", HTML, frozenset(), "<x1/> <x2/>"),
        ('<p class="x NoTranslate y">Acme</p> ok', HTML, frozenset(), "<x1/> ok"),
        ('<p data-translate="no">Hi</p>', HTML, frozenset(), "<x1>Hi</x1>"),
        ("<k>a<k>b</k>c</k>d", XML, frozenset({"k"}), "<x1/>d"),
        ("<k>never closed <b>x</b>", XML, frozenset({"k"}), "<x1/>"),
        ('Go <a title="a>b">there</a>.', HTML, frozenset(), "Go <x1>there</x1>."),
        ("A <b>bold <i>open</b> end</i>", HTML, frozenset(), "A <x1>bold <x2/>open</x1> end<x3/>"),
        ("<a><b></a></b>", XML, frozenset(), "<x1><x2/></x1><x3/>"),
        ("x <!-- open comment > y", HTML, frozenset(), "x <x1/> y"),
        ("x <!-- open comment, no bracket", HTML, frozenset(), "x <!-- open comment, no bracket"),
        ("<?pi?><![CDATA[<b>]]><!DOCTYPE x>t", XML, frozenset(), "<x1/><x2/><x3/>t"),
    ],
)
def test_markup_becomes_placeholders_and_comes_back(
    text: str, dialect: object, untranslated: frozenset[str], tagged: str
) -> None:
    assert dialect is HTML or dialect is XML
    result = to_placeholders(text, dialect, untranslated)
    assert result.text == tagged
    assert result.tagged == (tagged != text)
    assert tag_problem(result.text, result.text) is None
    assert result.restore(result.text) == text


def test_the_translation_s_order_of_tags_is_kept_and_invented_tags_dropped() -> None:
    result = to_placeholders('Click <a href="/x">here</a> to <b>open</b>.', HTML)
    assert result.text == "Click <x1>here</x1> to <x2>open</x2>."
    translated = "Pour <x2>ouvrir</x2>, cliquez <x1>ici</x1>.<x9/>"
    assert restore(translated, result.markup) == 'Pour <b>ouvrir</b>, cliquez <a href="/x">ici</a>.'


def test_markup_past_what_placeholders_can_number_is_refused_naming_the_limit() -> None:
    assert len(to_placeholders("<br/>" * MAX_PLACEHOLDERS, XML).markup) == MAX_PLACEHOLDERS
    with pytest.raises(TooMuchMarkupError, match="more than 9,999"):
        to_placeholders("<br/>" * (MAX_PLACEHOLDERS + 1), XML)


_PIECES = [
    "<b>", "</b>", "<i>", "</i>", "<B>", "<br>", "<br/>", "<a href='x>y'>", "</a>", "<code>", "</code>",
    '<span translate="no">', "</span>", "<script>", "</script>", "<!-- c -->", "<!--", "-->", "<![CDATA[", "]]>",
    "<?p ?>", "<!D>", "<", ">", "/", '"', "'", "x", "word ", " ", "\n", "<x1>", "</x1>", "<x2/>", "é",
]  # fmt: skip


@pytest.mark.parametrize("dialect", [HTML, XML], ids=lambda d: d.name)
def test_any_text_comes_back_byte_for_byte_with_tags_that_nest(dialect: object) -> None:
    """Property, over random texts of markup pieces: restored exactly, every placeholder paired or a unit, nested."""
    assert dialect is HTML or dialect is XML
    rng = random.Random(48)
    for _ in range(2_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40)))
        kept = frozenset(rng.sample(["b", "code", "i"], rng.randint(0, 2)))
        result = to_placeholders(text, dialect, kept)
        assert result.restore(result.text) == text, text
        assert tag_problem(result.text, result.text) is None, text
        tags = [token for token in tokens(result.text) if isinstance(token, Tag)]
        numbers = sorted({tag.number for tag in tags})
        assert numbers == list(range(1, len(numbers) + 1)), text  # numbered 1, 2, 3... in order of appearance
        assert set(result.markup) == {str(tag) for tag in tags}, text
        shuffled = result.text if not tags else _moved_first_unit(result.text)
        assert len(result.restore(shuffled)) == len(text), text  # tags moved: the same markup, elsewhere


def _moved_first_unit(tagged: str) -> str:
    """``tagged`` with its first unit tag moved to the end (a translation may reorder tags)."""
    parts = tokens(tagged)
    for index, part in enumerate(parts):
        if isinstance(part, Tag) and part.kind == "unit":
            return "".join(str(p) for p in parts[:index] + parts[index + 1 :]) + str(part)
    return tagged

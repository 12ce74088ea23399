"""DeepL's tag_handling on placeholder tags: markup swapped out, kept by the model, put back byte for byte."""

from __future__ import annotations

import pytest

from api.deepl_tags import restore, to_placeholders
from contract.inline_tags import tag_problem


@pytest.mark.parametrize(
    ("text", "handling", "ignore", "tagged"),
    [
        (
            '<p>Hello <b>world</b><br>and <a href="x">more</a>.</p>',
            "html",
            frozenset(),
            "<x1>Hello <x2>world</x2><x3/>and <x4>more</x4>.</x1>",
        ),
        ("a <code>x<code>y</code></code> b", "html", frozenset({"code"}), "a <x1/> b"),
        ('<span translate="no">Keep</span> this <!-- c -->', "html", frozenset(), "<x1/> this <x2/>"),
        ('<span class="a notranslate">Keep</span> it', "html", frozenset(), "<x1/> it"),
        ("<i>open and </x> stray", "html", frozenset(), "<x1/>open and <x2/> stray"),
        ("<T:b>Keep <t:b/> case</T:b>", "xml", frozenset(), "<x1>Keep <x2/> case</x1>"),
        ("<br>stays a pair in xml</br>", "xml", frozenset(), "<x1>stays a pair in xml</x1>"),
        ("a < b > c, no tags", "xml", frozenset(), "a < b > c, no tags"),
    ],
)
def test_markup_becomes_placeholders_and_comes_back_unchanged(
    text: str, handling: str, ignore: frozenset[str], tagged: str
) -> None:
    result = to_placeholders(text, handling, ignore)
    assert result.text == tagged
    assert result.tagged == (tagged != text)
    assert tag_problem(result.text, result.text) is None  # the grammar the worker checks
    assert restore(result.text, result.markup) == text


def test_a_translation_that_reorders_tags_gets_the_markup_where_it_moved() -> None:
    result = to_placeholders('Click <a href="/x">here</a> to <b>open</b>.', "html")
    assert result.text == "Click <x1>here</x1> to <x2>open</x2>."
    translated = "Pour <x2>ouvrir</x2>, cliquez <x1>ici</x1>.<x9/>"  # x9: made up by the model
    assert restore(translated, result.markup) == 'Pour <b>ouvrir</b>, cliquez <a href="/x">ici</a>.'

"""LibreTranslate's ``format: html``: a fragment's markup as placeholder tags, and back."""

from __future__ import annotations

import pytest

from api.libretranslate_html import tag_html
from contract.inline_tags import tag_problem


@pytest.mark.parametrize(
    ("fragment", "model_text"),
    [
        ("Plain text, 1 < 2.", "Plain text, 1 < 2."),
        ('Click <a href="/x?a>b">here</a> now.', "Click <x1>here</x1> now."),
        ("<b>Bold <i>both</i></b><br>next", "<x1>Bold <x2>both</x2></x1><x3/>next"),
        ("A <b>bold <i>open</b> end", "A <x1>bold <x2/>open</x1> end"),  # <i> never closed: a unit tag
        ("Run <code>make <test></code> now", "Run <x1/> now"),  # code is never translated
        ('Our <span translate="no">Acme Pro</span> app', "Our <x1/> app"),
        ("One<!-- note <b> -->two <p>left open", "One<x1/>two <x2/>left open"),
        ("stray </b> close", "stray <x1/> close"),
        ("<x1>an element named x1</x1>", "<x1>an element named x1</x1>"),
    ],
)
def test_markup_becomes_tags_and_comes_back(fragment: str, model_text: str) -> None:
    tagged = tag_html(fragment)
    assert tagged.text == model_text
    assert tag_problem(tagged.text, tagged.text) is None  # the tags pair up: the worker can check them
    assert tagged.restore(tagged.text) == fragment


def test_restore_follows_the_translations_order_and_drops_invented_tags() -> None:
    tagged = tag_html('The <b>red</b> <a href="/car">car</a>')
    assert tagged.text == "The <x1>red</x1> <x2>car</x2>"
    assert tagged.restore("La <x2>voiture</x2> <x1>rouge</x1><x9/>") == 'La <a href="/car">voiture</a> <b>rouge</b>'

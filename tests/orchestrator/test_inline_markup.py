"""Inline markup stays inside the sentence: a table of tricky inputs per format.

Each case holds the source, what the model is sent (whole sentences, inline markup as numbered
placeholder tags) and the assembled output when every segment comes back in capitals with its
tags kept; the byte-exact identity round trip is checked for every case.
"""

from __future__ import annotations

import json

import pytest

from contract.inline_tags import Tag, tokens
from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton


def shout(text: str) -> str:
    """A stand-in translation: the text in capitals, placeholder tags as they were."""
    return "".join(str(t) if isinstance(t, Tag) else t.upper() for t in tokens(text))


# name: (format, source, segments sent to the model, output with every segment in capitals)
CASES: dict[str, tuple[str, str, list[str], str]] = {
    "html: a link and bold text inside one sentence": (
        "html",
        '<p>Click <a href="/x">here</a> to <b>open</b> the file.</p>',
        ["Click <x1>here</x1> to <x2>open</x2> the file."],
        '<p>CLICK <a href="/x">HERE</a> TO <b>OPEN</b> THE FILE.</p>',
    ),
    "html: translate=no span": (
        "html",
        '<p>Ask <span translate="no">Dragoman</span> to help.</p>',
        ["Ask <x1/> to help."],
        '<p>ASK <span translate="no">Dragoman</span> TO HELP.</p>',
    ),
    "html: notranslate block": (
        "html",
        '<div class="notranslate">Keep <b>this</b></div><p>Go.</p>',
        ["Go."],
        '<div class="notranslate">Keep <b>this</b></div><p>GO.</p>',
    ),
    "html: nested inline elements": (
        "html",
        "<p><b>Bold <i>and italic</i></b> text.</p>",
        ["<x1>Bold <x2>and italic</x2></x1> text."],
        "<p><b>BOLD <i>AND ITALIC</i></b> TEXT.</p>",
    ),
    "html: attributes of form controls": (
        "html",
        '<input placeholder="Your name"><button aria-label="Close dialog">×</button>',
        ["Your name", "Close dialog"],
        '<input placeholder="YOUR NAME"><button aria-label="CLOSE DIALOG">×</button>',
    ),
    "html: meta description and lang": (
        "html",
        '<html lang="en"><head><meta name="description" content="All about cats."></head></html>',
        ["All about cats."],
        '<html lang="fr"><head><meta name="description" content="ALL ABOUT CATS."></head></html>',
    ),
    "html: an inline element never closed": (
        "html",
        "<p>Some <b>bold text.</p>",
        ["Some <x1/>bold text."],
        "<p>SOME <b>BOLD TEXT.</p>",
    ),
    "html: entities in an attribute": (
        "html",
        '<img src="a.png" alt="Tom &amp; Jerry">',
        ["Tom & Jerry"],
        '<img src="a.png" alt="TOM &amp; JERRY">',
    ),
    "html: an image inside a sentence": (
        "html",
        '<p>See <img src="d.png" alt="the diagram"> below.</p>',
        ["the diagram", "See <x1/> below."],
        '<p>SEE <img src="d.png" alt="THE DIAGRAM"> BELOW.</p>',
    ),
    "html: code inside a sentence": (
        "html",
        "<p>Call <code>run()</code> twice.</p>",
        ["Call <x1/> twice."],
        "<p>CALL <code>run()</code> TWICE.</p>",
    ),
    "md: inline code in the README's sentence": (
        "md",
        "Run `dragoman translate` to translate this file.\n",
        ["Run <x1/> to translate this file."],
        "RUN `dragoman translate` TO TRANSLATE THIS FILE.\n",
    ),
    "md: table without leading pipes": (
        "md",
        "Name | Value\n--- | ---\nOne | Two\n",
        ["Name", "Value", "One", "Two"],
        "NAME | VALUE\n--- | ---\nONE | TWO\n",
    ),
    "md: nested list": (
        "md",
        "- Item one\n  - Nested *item*\n",
        ["Item one", "Nested <x1>item</x1>"],
        "- ITEM ONE\n  - NESTED *ITEM*\n",
    ),
    "md: reference link": (
        "md",
        "See [the guide][g] now.\n\n[g]: http://x.org\n",
        ["See <x1>the guide</x1> now."],
        "SEE [THE GUIDE][g] NOW.\n\n[g]: http://x.org\n",
    ),
    "md: HTML block": (
        "md",
        "<div>\nHello <b>world</b>.\n</div>\n",
        ["Hello <x1>world</x1>."],
        "<div>\nHELLO <b>WORLD</b>.\n</div>\n",
    ),
    "md: front matter": (
        "md",
        "---\ntitle: x\n---\nText.\n",
        ["Text."],
        "---\ntitle: x\n---\nTEXT.\n",
    ),
    "md: wrapped paragraph": (
        "md",
        "This sentence is\nwrapped over lines.\n",
        ["This sentence is wrapped over lines."],
        "THIS SENTENCE IS WRAPPED OVER LINES.\n",
    ),
    "md: autolink and bare URL": (
        "md",
        "Visit <https://x.org> or https://y.org.\n",
        ["Visit <x1/> or <x2/>."],
        "VISIT <https://x.org> OR https://y.org.\n",
    ),
    "md: emphasis": (
        "md",
        "This is **very** _important_.\n",
        ["This is <x1>very</x1> <x2>important</x2>."],
        "THIS IS **VERY** _IMPORTANT_.\n",
    ),
    "md: snake_case is no emphasis": (
        "md",
        "Use my_var_name here.\n",
        ["Use my_var_name here."],
        "USE MY_VAR_NAME HERE.\n",
    ),
    "md: image alt text": (
        "md",
        "![A red car](car.png)\n",
        ["A red car"],
        "![A RED CAR](car.png)\n",
    ),
    "txt: hard-wrapped paragraph": (
        "txt",
        "This paragraph was wrapped at forty characters\nso every line is only part of a\nsentence.\n",
        ["This paragraph was wrapped at forty characters so every line is only part of a sentence."],
        "THIS PARAGRAPH WAS WRAPPED AT FORTY CHARACTERS\nSO EVERY LINE IS ONLY PART OF A SENTENCE.\n",
    ),
    "txt: short lines stay lines": (
        "txt",
        "Milk\nEggs\nBread\n",
        ["Milk", "Eggs", "Bread"],
        "MILK\nEGGS\nBREAD\n",
    ),
    "txt: text that looks like a tag": (
        "txt",
        "Write <x1> in the box.\n",
        ["Write <x1> in the box."],
        "WRITE <x1> IN THE BOX.\n",
    ),
    "html: escaped text that reads as a tag": (
        "html",
        "<p>Type &lt;x1/&gt; here <b>now</b>.</p>\n",
        ["Type <x1/> here", "now"],
        "<p>TYPE &lt;x1/&gt; HERE <b>NOW</b>.</p>\n",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_inline_markup_stays_inside_whole_sentences(name: str) -> None:
    fmt, source, sent, translated = CASES[name]
    skeleton = split_document(source, fmt, 200)
    assert skeleton.source() == source
    assert [segment.text for segment in skeleton.segments] == sent
    assert skeleton.assemble([shout(segment.text) for segment in skeleton.segments], "fr") == translated
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    assert stored.source() == source
    assert stored.assemble([shout(segment.text) for segment in stored.segments], "fr") == translated

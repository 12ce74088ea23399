"""Inline code at a paragraph's start or end travels inside its sentence, framing markup stays outside.

The corpus run found ``<p><code>libffi</code> does not support arrays.</p>`` sent as
"does not support arrays.": a language that reorders (German verb-final, Japanese SOV) needs the
code inside the sentence. A code span, an inline code element, a URL, a placeholder at a block's
edge is a unit tag in the segment, as it is in the middle of one; a paragraph's wrapper, a list
bullet, leading whitespace and an image at the edge stay literal.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton
from tests.orchestrator.test_segmenting import shout

# name: (format, source, segments sent to the model, output with every segment in capitals)
CASES: dict[str, tuple[str, str, list[str], str]] = {
    "html: code opens the paragraph": (
        "html",
        "<p><code>libffi</code> does not support arrays.</p>",
        ["<x1/> does not support arrays."],
        "<p><code>libffi</code> DOES NOT SUPPORT ARRAYS.</p>",
    ),
    "html: code closes the paragraph": (
        "html",
        "<p>Disable it with <code>make X=no</code></p>",
        ["Disable it with <x1/>"],
        "<p>DISABLE IT WITH <code>make X=no</code></p>",
    ),
    "html: code opens the second sentence": (  # sentences are packed up to the segment length
        "html",
        "<p>It builds. <code>make check</code> runs the tests.</p>",
        ["It builds. <x1/> runs the tests."],
        "<p>IT BUILDS. <code>make check</code> RUNS THE TESTS.</p>",
    ),
    "html: translate=no span opens the paragraph": (
        "html",
        '<p>\n  <span translate="no">Dragoman</span> helps.\n</p>',
        ["<x1/> helps."],
        '<p>\n  <span translate="no">Dragoman</span> HELPS.\n</p>',
    ),
    "html: an image at the edge stays outside": (
        "html",
        '<p><img src="logo.png"> Welcome home.</p>',
        ["Welcome home."],
        '<p><img src="logo.png"> WELCOME HOME.</p>',
    ),
    "html: bold around the whole sentence stays outside": (
        "html",
        "<p><b>Note.</b></p>",
        ["Note."],
        "<p><b>NOTE.</b></p>",
    ),
    "md: a list item ending in a code span": (
        "md",
        "* openssl - disable with `make WITH_TLS=no`\n",
        ["openssl - disable with <x1/>"],
        "* OPENSSL - DISABLE WITH `make WITH_TLS=no`\n",
    ),
    "md: a code span opens the paragraph": (
        "md",
        "`libffi` does not support arrays.\n",
        ["<x1/> does not support arrays."],
        "`libffi` DOES NOT SUPPORT ARRAYS.\n",
    ),
    "md: a URL closes the paragraph": (
        "md",
        "The manual is at https://example.com/manual\n",
        ["The manual is at <x1/>"],
        "THE MANUAL IS AT https://example.com/manual\n",
    ),
    "json: a placeholder opens the message": (
        "json",
        '{"missing": "{name} was not found"}',
        ["<x1/> was not found"],
        '{"missing": "{name} WAS NOT FOUND"}',
    ),
    "json: a printf placeholder closes the message": (
        "json",
        '{"saved": "Saved to %s"}',
        ["Saved to <x1/>"],
        '{"saved": "SAVED TO %s"}',
    ),
    "po: a placeholder opens the message": (
        "po",
        'msgid "%s: file not found"\nmsgstr ""\n',
        ["<x1/>: file not found"],
        'msgid "%s: file not found"\nmsgstr "%s: FILE NOT FOUND"\n',
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_edge_inline_code_travels_inside_the_sentence(name: str) -> None:
    fmt, source, sent, translated = CASES[name]
    skeleton = split_document(source, fmt, 200)
    assert skeleton.source() == source
    assert [segment.text for segment in skeleton.segments] == sent
    assembled = skeleton.assemble([shout(segment.text) for segment in skeleton.segments], "fr")
    assert translated in assembled  # a catalogue's header gains the target language
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    assert stored.source() == source
    assert stored.assemble([shout(segment.text) for segment in stored.segments], "fr") == assembled


def test_a_dropped_edge_tag_keeps_the_source_sentence() -> None:
    """A translation that loses the edge code's tag is refused by the tags check, not written without the code."""
    source = "<p><code>libffi</code> does not support arrays.</p>"
    skeleton = split_document(source, "html", 200)
    (segment,) = skeleton.segments
    assert not segment.tags_kept("DOES NOT SUPPORT ARRAYS.")
    assert skeleton.assemble(["DOES NOT SUPPORT ARRAYS."], "fr") == source


def test_a_sentence_that_opens_with_code_is_cut_from_the_one_before() -> None:
    """Past the segment length, sentences are cut apart: the code goes with the sentence it opens."""
    source = f"<p>{'It builds on every machine. ' * 2}<code>make check</code> runs the tests.</p>"
    skeleton = split_document(source, "html", 60)
    assert [segment.text for segment in skeleton.segments] == [
        "It builds on every machine.",
        "It builds on every machine.",
        "<x1/> runs the tests.",
    ]
    assert skeleton.source() == source

"""Markdown code spans and inline HTML that cross a soft line break stay markup the model never reads.

The inline pass reads a paragraph with its soft breaks as spaces (as CommonMark does) before it
pairs backticks and finds tags, so a span wrapped over two lines is one unit tag and the spans
after it pair as written.
"""

from __future__ import annotations

import pytest

from orchestrator.segmenting import split_document
from tests.orchestrator.test_segmenting import shout as _shout

CASES = {
    "code span": ("Run `pip\ninstall dragoman` now.\n", ["Run <x1/> now."]),
    "inline html": ('A <span class="a"\n  id="b">marked</span> word.\n', ["A <x1>marked</x1> word."]),
    "spans after the wrapped one": (
        "Use `a\nb` then `c` and `d`,\nalso `e` and <kbd>Ctrl</kbd>\nhere.\n",
        ["Use <x1/> then <x2/> and <x3/>, also <x4/> and <x5>Ctrl</x5> here."],
    ),
    "in a quote": ("> Quote `one\n> two` and `three`.\n", ["Quote <x1/> and <x2/>."]),
    "in a list item": ("- Item `one\n  two` done.\n", ["Item <x1/> done."]),
    "unclosed backticks": ("A `` tick\nand `code` here.\n", ["A `` tick and <x1/> here."]),
}


@pytest.mark.parametrize("case", CASES)
def test_spans_across_a_soft_break_are_units(case: str) -> None:
    source, expected = CASES[case]
    skeleton = split_document(source, "md", 500)
    assert [s.text for s in skeleton.segments] == expected
    assert skeleton.source() == source
    translated = skeleton.assemble([_shout(s.text) for s in skeleton.segments])
    for code in ("`pip\ninstall dragoman`", '<span class="a"\n  id="b">', "`a\nb`", "`one\n> two`", "`one\n  two`"):
        assert translated.count(code) == source.count(code)

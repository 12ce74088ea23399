"""A translated ``.po`` file always parses, and an assembled document invalid in its format fails (issue 50).

A Sphinx catalogue's message may hold an ``<a href="…">``: its quotes are escaped in the ``msgid``
(``\\"``), the model sees the tag as ``<x1>…</x1>``, and the ``msgstr`` must escape them again.
"""

from __future__ import annotations

import pytest

from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.split import finish_document
from tests.msgfmt_check import assert_msgfmt_accepts
from worker.deterministic_engine import swap_case_outside_tags

# The shape of a Sphinx documentation catalogue (sphinx-build -b gettext), one message with a link.
SPHINX_PO = r"""msgid ""
msgstr ""
"Project-Id-Version: Example 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"

#: ../../index.rst:12
msgid "Read the <a href=\"https://example.org/guide.html\" title=\"The \\\"guide\\\"\">user guide</a> first."
msgstr ""
"""


def test_quotes_in_a_tag_are_escaped_in_the_msgstr_and_msgfmt_accepts_it() -> None:
    skeleton = split_document(SPHINX_PO, "po", 400)
    sent = [segment.text for segment in skeleton.segments]
    assert sent == ["Read the <x1>user guide</x1> first."]
    out = finish_document("po", skeleton.assemble([swap_case_outside_tags(text) for text in sent], "de"))
    assert (
        r'msgstr "rEAD THE <a href=\"https://example.org/guide.html\" '
        r'title=\"The \\\"guide\\\"\">USER GUIDE</a> FIRST."' in out
    )
    assert_msgfmt_accepts(out)


def test_a_catalogue_that_does_not_parse_fails_with_the_line() -> None:
    broken = SPHINX_PO.replace('msgstr ""\n"""', "").replace(
        'first."\nmsgstr ""\n', 'first."\nmsgstr "See <a href="x">"\n'
    )
    with pytest.raises(InvalidJobError, match=r"the translated catalogue does not parse: .*line 8 is not"):
        finish_document("po", broken)


def test_an_xliff_file_that_is_not_well_formed_fails_with_the_reason() -> None:
    broken = '<?xml version="1.0"?><xliff version="1.2"><file><body><trans-unit id="1"><target>a < b</target>'
    with pytest.raises(InvalidJobError, match="not well-formed XML"):
        finish_document("xliff", broken)
    finish_document("xliff", broken.replace("a < b", "a &lt; b") + "</trans-unit></body></file></xliff>")

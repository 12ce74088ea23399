"""printf's thousands' grouping flag (``%'d``, ``%'.1f``) is a placeholder the model never sees (issue 50).

GNU coreutils and findutils catalogues write it (``%'d`` items, ``%'.1f`` MiB); a translation that
lost or changed it makes ``msgfmt -c`` fail ("format specifications ... are not the same").
"""

from __future__ import annotations

import pytest

from contract.placeholders import placeholders
from orchestrator.segmenting import split_document
from tests.msgfmt_check import assert_msgfmt_accepts
from worker.deterministic_engine import swap_case_outside_tags

CATALOGUE = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"

#, c-format
msgid "Copied %'d files, %'.1f MiB, in %1$'d passes"
msgstr ""
"""


@pytest.mark.parametrize(("text", "found"), [("%'d files", ["%'d"]), ("%'.1f MiB", ["%'.1f"]), ("%2$'ld", ["%2$'ld"])])
def test_the_grouping_flag_is_part_of_the_placeholder(text: str, found: list[str]) -> None:
    assert list(placeholders(text).elements()) == found


@pytest.mark.parametrize("prose", ["it is 100%'s worth", "50%' of it"])
def test_a_quote_after_a_percent_in_prose_is_no_placeholder(prose: str) -> None:
    assert not placeholders(prose)


def test_a_grouped_number_is_kept_from_the_model_and_msgfmt_accepts_the_translation() -> None:
    skeleton = split_document(CATALOGUE, "po", 400)
    sent = [segment.text for segment in skeleton.segments]
    assert sent == ["Copied <x1/> files, <x2/> MiB, in <x3/> passes"]
    out = skeleton.assemble([swap_case_outside_tags(text) for text in sent], "de")
    assert """msgstr "cOPIED %'d FILES, %'.1f mIb, IN %1$'d PASSES\"""" in out
    assert_msgfmt_accepts(out)

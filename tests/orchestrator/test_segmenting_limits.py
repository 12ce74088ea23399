"""Hostile documents: every splitter is linear and recursion-free, and sizes are capped with clear errors.

Each case reproduces a way the old splitters hung or crashed the only orchestrator: ``> `` nested
tens of thousands deep overflowed the recursive Markdown splitter; unclosed comments, tags and
quotes made the HTML regex read to the end of the document from every ``<`` (200 kB took
minutes); a heading padded with spaces did the same to the heading regex. Each case must split and
round-trip; the old splitters' time on it shows as the test's timeout (speed is not asserted here).
"""

from __future__ import annotations

import pytest

from contract.errors import DocumentTooLargeError, InvalidJobError
from orchestrator.segmenting import split_document

SIZE = 200_000

HOSTILE = {
    "html: unclosed comments": ("<!--x" * (SIZE // 5), "html"),
    "html: unclosed tags": ("<a x" * (SIZE // 4), "html"),
    "html: unclosed quotes in tags": ('<a "' * (SIZE // 4), "html"),
    "html: unclosed processing instructions": ("<?x" * (SIZE // 3), "html"),
    "html: untranslated elements never closed": ("<pre>" * (SIZE // 10) + "</pre>" * (SIZE // 12), "html"),
    "md: quotes nested deep": ("> " * (SIZE // 2) + "text\n", "md"),
    "md: list items nested deep": ("- " * (SIZE // 2) + "text\n", "md"),
    "md: heading padded with spaces": ("# a" + " " * SIZE + "x\n", "md"),
    "md: unclosed tags and link targets": ("w <a w ](" * (SIZE // 9), "md"),
    "md: backtick runs never closed": ("".join("`" * (i % 50 + 1) + " w " for i in range(SIZE // 30)), "md"),
    "md: a paragraph of wrapped code spans": ("w `a\nb` w\n" * (SIZE // 10), "md"),
    "md: tags never closed over wrapped lines": ("w <a w\n" * (SIZE // 7), "md"),
    "txt: one sentence without punctuation": ("word " * (SIZE // 5), "txt"),
    "html: one tag per character": ("<b>" * (SIZE // 3), "html"),
    "html: inline elements with alt text in one sentence": ('w <img alt="a b"> ' * (SIZE // 18), "html"),
    "srt: one cue of styling tags": ("1\n00:00:01,000 --> 00:00:02,000\n" + "<i>a " * (SIZE // 5), "srt"),
    "vtt: ten thousand cues": ("WEBVTT\n\n" + "00:01.000 --> 00:02.000\nHi <b>you</b>.\n\n" * (SIZE // 40), "vtt"),
    "po: one message of continuation lines": ('msgid ""\n' + '"word %s "\n' * (SIZE // 12) + 'msgstr ""\n', "po"),
    "json: a value of unclosed ICU braces": ('{"a": "' + "{x, plural, one {" * (SIZE // 17) + '"}', "json"),
    "xliff: one source of inline codes": (
        '<xliff version="1.2"><file><body><trans-unit id="1"><source>'
        + '<g id="1">w</g><x id="2"/>' * (SIZE // 26)
        + "</source></trans-unit></body></file></xliff>",
        "xliff",
    ),
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_documents_split_in_linear_time(case: str) -> None:
    source, fmt = HOSTILE[case]
    skeleton = split_document(source, fmt, 1_500)
    assert skeleton.source() == source


def test_json_nested_past_pythons_recursion_limit_is_a_clear_error() -> None:
    with pytest.raises(InvalidJobError, match="nested too deeply"):
        split_document("[" * 100_000 + "]" * 100_000, "json", 1_500)


def test_a_document_over_the_size_limit_is_refused_with_the_setting_named() -> None:
    with pytest.raises(DocumentTooLargeError, match="DRAGOMAN_MAX_DOCUMENT_CHARS"):
        split_document("word. " * 1_000, "txt", 100, max_document_chars=5_000)


def test_a_document_over_the_segment_limit_stops_at_the_limit() -> None:
    with pytest.raises(DocumentTooLargeError, match="DRAGOMAN_MAX_DOCUMENT_SEGMENTS"):
        split_document("line\n" * 1_000_000, "txt", 100, max_segments=1_000)
    assert len(split_document("line\n" * 1_000, "txt", 100, max_segments=1_000).segments) == 1_000


def test_code_spans_close_on_a_run_of_the_same_length() -> None:
    skeleton = split_document("Use ``a ` b`` here and `c` there, ``` not closed\n", "md", 200)
    assert [s.text for s in skeleton.segments] == ["Use <x1/> here and <x2/> there, ``` not closed"]
    assert skeleton.segments[0].codes == (("``a ` b``", ""), ("`c`", ""))


def test_a_sentence_with_more_markup_than_tags_goes_out_as_its_runs() -> None:
    source = "<p>" + "".join(f"w{i} <b>x</b> " for i in range(150)) + "end.</p>"
    skeleton = split_document(source, "html", 100_000)
    assert skeleton.source() == source
    assert all(not segment.codes for segment in skeleton.segments)  # no segment carries 300 tags
    assert len(skeleton.segments) > 100

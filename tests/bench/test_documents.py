"""``bench.documents``' whole-sentence measure, and the template ``bench.corpus`` makes of a catalogue."""

from __future__ import annotations

from bench.corpus import as_template
from bench.documents import _is_whole, measure


def test_whole_share_reads_the_source_after_an_attribute_value_held_in_markup() -> None:
    """An ``alt`` held in a literal (detached) is counted at its own length, so later segments are found where they are.

    The measure used to advance by the literal's length with the attribute's place mark in it, so
    every segment after an image's ``alt`` was judged against the wrong source text: "and then
    the rest", starting a paragraph, was taken for a fragment.
    """
    source = (
        '<p><img src="m.png" alt="A map of the regional network of all trains"> The map.</p>\n'
        "<p>and <b>then</b> the rest</p>\n"
    )
    assert measure("html", source)["whole_share"] == 1.0


def test_a_catalogue_becomes_a_template_with_a_template_header() -> None:
    """Every ``msgstr`` but the header's is emptied (several lines, plural forms); the header's language too."""
    catalogue = (
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'
        'msgid "File"\nmsgstr "Datei"\n\n'
        'msgid "long"\nmsgstr ""\n"lang "\n"und mehr"\n\n'
        'msgid "one"\nmsgid_plural "many"\nmsgstr[0] "eins"\nmsgstr[1] "viele"\n'
    )
    assert as_template(catalogue) == (
        'msgid ""\nmsgstr ""\n"Language: \\n"\n"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n"\n\n'
        'msgid "File"\nmsgstr ""\n\n'
        'msgid "long"\nmsgstr ""\n\n'
        'msgid "one"\nmsgid_plural "many"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    )


def test_whole_share_knows_a_tag_that_spans_lines() -> None:
    """DocBook's HTML closes its tags on the next line (``</P\\n>``): that is a block boundary all the same."""
    assert measure("html", "<P\n>Users and Groups in the Debian System</P\n>\n")["whole_share"] == 1.0


def test_whole_share_counts_a_code_span_left_outside_as_a_cut_sentence() -> None:
    """A segment that leaves a code span beside it out is not whole: the span is a word of its sentence.

    The measure skipped a code span as inline markup, so ``* openssl - disable with`` (the split of
    the list item before the code span went inside the segment) counted as a whole sentence.
    """
    source = "* openssl - disable with `make WITH_TLS=no`\n"
    start = source.index("openssl")
    end = source.index(" `make")
    assert not _is_whole(source[start:end], source, start, end)
    assert _is_whole(source[start:-1], source, start, len(source) - 1)

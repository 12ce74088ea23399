"""``bench.documents``' whole-sentence measure, and the template ``bench.corpus`` makes of a catalogue."""

from __future__ import annotations

import base64
import io
import zipfile

from bench.corpus import as_template
from bench.documents import _is_whole, _same_document, formats_table, measure, measure_formats
from bench.format_sizes import build
from contract.documents import FORMATS


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


def test_per_format_times_every_format_and_each_round_trips_untranslated() -> None:
    """``--per-format`` on a few kB a format: a row for each of the 15 formats, segments cut, the identity held."""
    result = measure_formats(megabytes=0.004, repeats=1)
    assert list(result["formats"]) == list(FORMATS) and len(FORMATS) == 15
    for fmt, row in result["formats"].items():
        assert row["identity"], fmt
        assert row["segments"] > 0 and 3_000 < row["bytes"] < 8_000, (fmt, row)
        assert row["total_s_per_mb"] >= row["split_s_per_mb"]
    table = formats_table(result).splitlines()
    assert len(table) == 2 + 15 and all(line.endswith("| yes |") for line in table[2:])


def _rezipped(document: str, change: bytes = b"") -> str:
    """The zip of ``document`` written again two seconds later, ``change`` appended to its last member."""
    source = zipfile.ZipFile(io.BytesIO(base64.b64decode(document)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        infos = source.infolist()
        for info in infos:
            later = zipfile.ZipInfo(info.filename, (2030, 1, 1, 0, 0, 2))
            later.compress_type = info.compress_type
            archive.writestr(later, source.read(info) + (change if info is infos[-1] else b""))
    return base64.b64encode(buffer.getvalue()).decode()


def test_the_identity_check_compares_a_zips_members_not_its_timestamps() -> None:
    """Zipped again later, a document is the same (its members are); a changed member is not."""
    source, _, _ = build("odt", 2_000)
    assert _same_document("odt", _rezipped(source), source)
    assert not _same_document("odt", _rezipped(source, b" "), source)
    text, _, _ = build("md", 2_000)
    assert _same_document("md", text, text) and not _same_document("md", text + "\n", text)

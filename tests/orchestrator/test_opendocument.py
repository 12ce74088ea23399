"""OpenDocument (.odt, .odp, .ods): what the model is sent, byte-exact round trips, structure kept, clear errors."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import time
import xml.etree.ElementTree as ElementTree
import zipfile
from pathlib import Path

import pytest

from contract.documents import encode_document
from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.opendocument import MAX_NESTING
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import finish_document
from tests.orchestrator.test_document_formats import make_docx, shout

REAL_ODT = Path("/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/docutils/writers/odf_odt/styles.odt")
DOCUTILS_PYTHON = REAL_ODT.parents[6] / "bin" / "python"  # the Python whose docutils holds that file
NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" '
    'xmlns:calcext="urn:org:documentfoundation:names:experimental:calc:xmlns:calcext:1.0"'
)
DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
ODT_BODY = (
    '<text:h text:style-name="P1" text:outline-level="1">Getting started</text:h>'
    '<text:p text:style-name="Standard">Click <text:span text:style-name="T1">here</text:span> to open the '
    '<text:a xlink:type="simple" xlink:href="https://example.com/a?b=1&amp;c=2">file &amp; folder</text:a>.'
    "<text:s/>Then press<text:tab/>Enter.<text:line-break/>Done"
    '<text:note text:id="ftn1" text:note-class="footnote"><text:note-citation>1</text:note-citation>'
    '<text:note-body><text:p text:style-name="Footnote">See the manual. It has more.</text:p></text:note-body>'
    "</text:note> today.</text:p>"
    '<text:p text:style-name="Standard"><text:bookmark-start text:name="b1"/>A long'
    '<text:soft-page-break/> sentence<text:bookmark-end text:name="b1"/> on page <text:page-number '
    'text:select-page="current">3</text:page-number>.</text:p>'
    '<text:p text:style-name="Standard"><draw:frame draw:name="Frame1" text:anchor-type="as-char" '
    'svg:width="2cm"><draw:text-box><text:p text:style-name="P2">Boxed text</text:p></draw:text-box>'
    "</draw:frame></text:p>"
    '<table:table table:name="Prices"><table:table-column/><table:table-row>'
    '<table:table-cell office:value-type="string"><text:p>Coffee</text:p></table:table-cell>'
    '<table:table-cell office:value-type="float" office:value="2.5"><text:p>2.50</text:p></table:table-cell>'
    "</table:table-row></table:table>"
    '<text:list text:style-name="L1"><text:list-item><text:p>First item</text:p></text:list-item></text:list>'
    "<text:p/>"
)
ODT_STYLES = (
    '<office:master-styles><style:master-page style:name="Standard"><style:header><text:p>Company '
    'confidential</text:p></style:header><style:footer><text:p>Page <text:page-number text:select-page="current"'
    ">1</text:page-number></text:p></style:footer></style:master-page></office:master-styles>"
)
MANIFEST = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<manifest:manifest '
    'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">\n'
    ' <manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/>\n'
    ' <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>\n'
    "</manifest:manifest>"
)


def make_odf(subtype: str, body: str, styles: str = "", title: str = "Annual report") -> bytes:
    """An OpenDocument file as LibreOffice writes one: ``mimetype`` first and stored, then the XML members."""
    mimetype = f"application/vnd.oasis.opendocument.{subtype}"
    office_body = {"text": "office:text", "presentation": "office:presentation", "spreadsheet": "office:spreadsheet"}
    element = office_body.get(subtype, "office:text")
    members = {
        "content.xml": f'{DECLARATION}<office:document-content {NS} office:version="1.3"><office:automatic-styles/>'
        f"<office:body><{element}>{body}</{element}></office:body></office:document-content>",
        "styles.xml": f'{DECLARATION}<office:document-styles {NS} office:version="1.3"><office:styles/>'
        f"{styles}</office:document-styles>",
        "meta.xml": f'{DECLARATION}<office:document-meta {NS} office:version="1.3"><office:meta>'
        f"<meta:generator>LibreOffice/7.6</meta:generator><dc:title>{title}</dc:title>"
        '<meta:document-statistic meta:word-count="12"/></office:meta></office:document-meta>',
        "settings.xml": f"{DECLARATION}<office:document-settings {NS}><office:settings/></office:document-settings>",
        "manifest.rdf": f'{DECLARATION}<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>',
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", mimetype, compress_type=zipfile.ZIP_STORED)
        archive.writestr("Configurations2/", b"")
        for name, content in members.items():
            archive.writestr(name, content)
        archive.writestr("Thumbnails/thumbnail.png", b"\x89PNG not really", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/manifest.xml", MANIFEST.format(mimetype=mimetype))
    return buffer.getvalue()


def _members(document: str) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(document)))
    return {name: archive.read(name) for name in archive.namelist()}


def _layout(document: str) -> list[tuple[str, int]]:
    """Each member's name and compression, in order."""
    return [
        (info.filename, info.compress_type)
        for info in zipfile.ZipFile(io.BytesIO(base64.b64decode(document))).infolist()
    ]


def _elements(xml: bytes) -> list[tuple[str, dict[str, str]]]:
    """Every element's name and attributes in document order: the structure, without the text.

    A soft page break is left out: where the application last broke the page, which a translation drops.
    """
    elements = ElementTree.fromstring(xml).iter()
    return [(e.tag, dict(e.attrib)) for e in elements if not e.tag.endswith("}soft-page-break")]


def _round_trips(fmt: str, data: bytes) -> tuple[Skeleton, dict[str, bytes]]:
    """Split ``data``; check the identity round trip and a translated one that keeps structure; the translation."""
    source = encode_document(fmt, data)
    skeleton = split_document(source, fmt, 200)
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    original = _members(source)
    identity = finish_document(fmt, stored.source())
    assert _members(identity) == original  # every member byte for byte
    assert _layout(identity) == _layout(source)  # mimetype first and stored, the same order
    translated_document = finish_document(fmt, stored.assemble([shout(s.text) for s in stored.segments], "fr"))
    assert _layout(translated_document) == _layout(source)
    translated = _members(translated_document)
    for name, content in original.items():
        if name in ("content.xml", "styles.xml", "meta.xml"):
            assert _elements(translated[name]) == _elements(content), name
        else:
            assert translated[name] == content, name
    return stored, translated


def test_odt_paragraphs_are_sentences_with_inline_markup_as_tags_and_footnotes_as_their_own_segments() -> None:
    stored, translated = _round_trips("odt", make_odf("text", ODT_BODY, ODT_STYLES))
    assert [s.text for s in stored.segments] == [
        "Getting started",
        "See the manual. It has more.",  # the footnote's body: its own segment, placed inside the note's tag
        "Click <x1>here</x1> to open the <x2>file & folder</x2>.<x3/>Then press<x4/>Enter.<x5/>Done<x6/> today.",
        "A long sentence<x1/> on page <x2/>.",  # the soft page break is no tag: a translation drops it
        "Boxed text",
        "Coffee",  # not the number cell's "2.50"
        "First item",
        "Company confidential",
        "Page",  # the page number field after it stays outside the segment
        "Annual report",
    ]
    content = translated["content.xml"].decode()
    assert (
        '<text:p text:style-name="Standard">CLICK <text:span text:style-name="T1">HERE</text:span> TO OPEN THE '
        '<text:a xlink:type="simple" xlink:href="https://example.com/a?b=1&amp;c=2">FILE &amp; FOLDER</text:a>.'
        "<text:s/>THEN PRESS<text:tab/>ENTER.<text:line-break/>DONE<text:note" in content
    )
    assert (
        '<text:note-citation>1</text:note-citation><text:note-body><text:p text:style-name="Footnote">'
        "SEE THE MANUAL. IT HAS MORE.</text:p></text:note-body></text:note> TODAY.</text:p>" in content
    )
    assert '<text:page-number text:select-page="current">3</text:page-number>.' in content  # a field kept
    assert "A LONG SENTENCE" in content and "<text:soft-page-break/>" not in content
    assert '<text:p text:style-name="P2">BOXED TEXT</text:p>' in content
    assert "<text:p>2.50</text:p>" in content and 'table:name="Prices"' in content
    assert b"<text:p>COMPANY CONFIDENTIAL</text:p>" in translated["styles.xml"]
    assert b"<dc:title>ANNUAL REPORT</dc:title>" in translated["meta.xml"]


def test_a_footnote_left_untranslated_comes_back_as_it_was_inside_its_translated_sentence() -> None:
    source = encode_document("odt", make_odf("text", ODT_BODY))
    skeleton = split_document(source, "odt", 200)
    translations = [None if "manual" in s.text else shout(s.text) for s in skeleton.segments]
    content = _members(finish_document("odt", skeleton.assemble(translations)))["content.xml"].decode()
    assert "DONE<text:note" in content and ">See the manual. It has more.</text:p>" in content


def test_a_text_box_inside_a_footnote_is_translated_around_it() -> None:
    body = (
        "<text:p>Main<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>Note start "
        '<draw:frame text:anchor-type="as-char"><draw:text-box><text:p>Deep text</text:p></draw:text-box>'
        "</draw:frame> note end.</text:p></text:note-body></text:note> text.</text:p>"
    )
    stored, translated = _round_trips("odt", make_odf("text", body))
    assert sorted(s.text for s in stored.segments) == [
        "Annual report",
        "Deep text",
        "Main<x1/> text.",
        "Note start",
        "note end.",
    ]
    assert b"<text:p>NOTE START <draw:frame" in translated["content.xml"]
    assert b"<text:p>DEEP TEXT</text:p>" in translated["content.xml"]


ODS_BODY = (
    '<table:table table:name="Budget 2024"><table:table-column table:number-columns-repeated="4"/>'
    "<table:table-row>"
    '<table:table-cell office:value-type="string" calcext:value-type="string"><text:p>Rent &lt;monthly&gt;</text:p>'
    "</table:table-cell>"
    '<table:table-cell office:value-type="float" office:value="1200" calcext:value-type="float"><text:p>1200</text:p>'
    "<office:annotation><dc:creator>Ann</dc:creator><text:p>Check this amount</text:p></office:annotation>"
    "</table:table-cell>"
    '<table:table-cell office:value-type="date" office:date-value="2024-01-31"><text:p>Jan 31, 2024</text:p>'
    "</table:table-cell>"
    '<table:table-cell office:value-type="percentage" office:value="0.5"><text:p>50 percent</text:p></table:table-cell>'
    "</table:table-row><table:table-row>"
    '<table:table-cell table:formula="of:=CONCATENATE(&quot;Total&quot;;&quot; due&quot;)" office:value-type="string" '
    'office:string-value="Total due"><text:p>Total due</text:p></table:table-cell>'
    '<table:table-cell office:value-type="currency" office:currency="EUR" office:value="3"><text:p>3,00 euros</text:p>'
    "</table:table-cell><table:table-cell><text:p>No value type</text:p></table:table-cell>"
    "<table:table-cell/></table:table-row></table:table>"
    '<table:table table:name="Notes"><table:table-row><table:covered-table-cell/></table:table-row></table:table>'
)


def test_ods_translates_text_cells_and_comments_never_numbers_dates_formulas_or_sheet_names() -> None:
    stored, translated = _round_trips("ods", make_odf("spreadsheet", ODS_BODY))
    assert [s.text for s in stored.segments] == [
        "Rent <monthly>",
        "Check this amount",
        "No value type",
        "Annual report",
    ]
    content = translated["content.xml"].decode()
    assert "<text:p>RENT &lt;MONTHLY&gt;</text:p>" in content and "<text:p>CHECK THIS AMOUNT</text:p>" in content
    for kept in (
        "<text:p>1200</text:p>",
        "<text:p>Jan 31, 2024</text:p>",
        "<text:p>50 percent</text:p>",
        "<text:p>Total due</text:p>",
        "<text:p>3,00 euros</text:p>",
        'table:name="Budget 2024"',
    ):
        assert kept in content


ODP_BODY = (
    '<draw:page draw:name="page1" draw:master-page-name="Default" presentation:presentation-page-layout-name="AL1T0">'
    '<draw:frame presentation:style-name="pr1" draw:layer="layout" presentation:class="title">'
    "<draw:text-box><text:p>Quarterly results</text:p></draw:text-box></draw:frame>"
    '<draw:frame presentation:class="outline" presentation:placeholder="true"><draw:text-box>'
    "<text:p>Click to add Text</text:p></draw:text-box></draw:frame>"
    '<draw:custom-shape draw:style-name="gr1"><text:p>Sales <text:span text:style-name="T1">grew</text:span> '
    "by a third.</text:p><draw:enhanced-geometry/></draw:custom-shape>"
    '<presentation:notes><draw:page-thumbnail draw:page-number="1"/>'
    '<draw:frame presentation:class="notes"><draw:text-box><text:list><text:list-item><text:p>Mention the '
    "new office.</text:p></text:list-item></text:list></draw:text-box></draw:frame></presentation:notes>"
    "</draw:page>"
)


def test_odp_translates_slides_shapes_and_speaker_notes_and_keeps_layout_prompts() -> None:
    stored, translated = _round_trips("odp", make_odf("presentation", ODP_BODY))
    assert [s.text for s in stored.segments] == [
        "Quarterly results",
        "Sales <x1>grew</x1> by a third.",
        "Mention the new office.",
        "Annual report",
    ]
    content = translated["content.xml"].decode()
    assert "<text:p>Click to add Text</text:p>" in content and "<text:p>MENTION THE NEW OFFICE.</text:p>" in content


@pytest.mark.skipif(not REAL_ODT.exists(), reason="docutils' LibreOffice-written styles.odt is not on this machine")
def test_a_real_libreoffice_odt_round_trips() -> None:
    stored, translated = _round_trips("odt", REAL_ODT.read_bytes())
    texts = [s.text for s in stored.segments]
    assert "Name all table styles with prefix “rststyle-table-”." in texts
    assert texts.count("Page") == 2  # the master pages' footers, from styles.xml
    assert "NAME ALL TABLE STYLES WITH PREFIX “RSTSTYLE-TABLE-”." in translated["content.xml"].decode()


def _zip(members: dict[str, str]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize(
    ("source", "fmt", "message"),
    [
        (base64.b64encode(b"PK not a zip").decode(), "odt", r"not a \.odt file \(not a zip archive"),
        (_zip({"mimetype": "application/vnd.oasis.opendocument.text"}), "odt", r"no content\.xml"),
        (
            encode_document("odt", make_odf("spreadsheet", ODS_BODY)),
            "odt",
            r"is an OpenDocument spreadsheet \(\.ods\), not a \.odt",
        ),
        (
            encode_document("ods", make_odf("text", ODT_BODY)),
            "ods",
            r"is an OpenDocument text document \(\.odt\), not a \.ods",
        ),
        (_zip({"content.xml": "<office:document-content><text:p>"}), "odp", r"content\.xml is not well-formed XML"),
        (_zip({"content.xml": '<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>'}), "odt", r"content\.xml has a <!DOCTYPE>"),
    ],
)
def test_a_file_that_is_not_opendocument_is_a_clear_error(source: str, fmt: str, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        split_document(source, fmt, 200)


def test_a_long_paragraph_is_cut_at_sentence_ends_with_its_tags_paired_in_each() -> None:
    sentence = "This sentence is about twenty-five words long, give or take, so a few of them fill a segment."
    body = f'<text:p>{sentence} <text:span text:style-name="T1">{sentence}</text:span> {sentence}</text:p>'
    stored, _ = _round_trips("odt", make_odf("text", body))
    assert [s.text for s in stored.segments][:3] == [sentence, sentence, sentence]  # the span around a whole sentence
    assert all(re.fullmatch(r"[^<]*", s.text) for s in stored.segments)


def test_escaped_text_that_reads_as_a_placeholder_tag_keeps_the_member_valid_xml() -> None:
    body = '<text:p>Type &lt;x1/&gt; here <text:span text:style-name="T1">now</text:span>.</text:p>'
    stored, translated = _round_trips("odt", make_odf("text", body))
    assert [s.text for s in stored.segments][:2] == ["Type <x1/> here", "now"]  # its runs on their own, no tags
    assert (
        b'<text:p>TYPE &lt;x1/&gt; HERE <text:span text:style-name="T1">NOW</text:span>.</text:p>'
        in translated["content.xml"]
    )


def test_text_boxes_nested_thousands_deep_split_fast_and_round_trip() -> None:
    depth = 3000
    body = (
        "<text:p>Top "
        + "<draw:frame><draw:text-box><text:p>Deep " * depth
        + "end"
        + "</text:p></draw:text-box></draw:frame>" * depth
        + " text.</text:p>"
    )
    started = time.perf_counter()
    stored, _ = _round_trips("odt", make_odf("text", body))
    assert time.perf_counter() - started < 5
    assert [s.text for s in stored.segments] == ["Deep"] * MAX_NESTING + ["Top <x1/> text.", "Annual report"]


@pytest.mark.parametrize("fmt", ["odt", "docx"])
def test_a_control_character_a_model_writes_is_left_out_and_the_member_stays_xml(fmt: str) -> None:
    data = make_odf("text", "<text:p>Hello world.</text:p>") if fmt == "odt" else make_docx()
    skeleton = split_document(encode_document(fmt, data), fmt, 200)
    translations = [f"{s.text}\x0b\x01 fin" for s in skeleton.segments]
    member = "content.xml" if fmt == "odt" else "word/document.xml"
    content = _members(finish_document(fmt, skeleton.assemble(translations)))[member].decode()
    assert ("Hello world. fin" if fmt == "odt" else "A cell fin") in content


def test_an_images_alternative_text_is_translated_in_a_paragraph_and_on_a_slide() -> None:
    image = (
        '<draw:frame draw:name="Image1" text:anchor-type="as-char"><draw:image xlink:href="Pictures/1.png"/>'
        "<svg:title>Sales chart</svg:title><svg:desc>Bars rising &amp; falling</svg:desc></draw:frame>"
    )
    stored, translated = _round_trips("odt", make_odf("text", f"<text:p>See {image} below.</text:p>"))
    assert [s.text for s in stored.segments] == [
        "Sales chart",
        "Bars rising & falling",
        "See <x1/> below.",
        "Annual report",
    ]
    assert (
        b"<svg:title>SALES CHART</svg:title><svg:desc>BARS RISING &amp; FALLING</svg:desc>" in translated["content.xml"]
    )
    stored, translated = _round_trips("odp", make_odf("presentation", f'<draw:page draw:name="p1">{image}</draw:page>'))
    assert [s.text for s in stored.segments] == ["Sales chart", "Bars rising & falling", "Annual report"]
    assert b"<svg:title>SALES CHART</svg:title>" in translated["content.xml"]


def test_a_footnote_inside_formatted_text_keeps_that_text_translated() -> None:
    note = "<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>A source.</text:p>"
    note += "</text:note-body></text:note>"
    body = f'<text:p>It <text:span text:style-name="T1">rose sharply{note}</text:span> in May.</text:p>'
    stored, translated = _round_trips("odt", make_odf("text", body))
    assert [s.text for s in stored.segments][:2] == ["A source.", "It <x1>rose sharply<x2/></x1> in May."]
    assert b'<text:span text:style-name="T1">ROSE SHARPLY<text:note>' in translated["content.xml"]


RST = """Quarterly report
================

This is *emphasis*, **strong** and ``code``, with a note [#]_.

.. [#] A footnote with *style*.

- First item.
- Second item.

+--------+-------+
| Name   | Value |
+========+=======+
| Coffee | 2.50  |
+--------+-------+
"""


@pytest.mark.skipif(not DOCUTILS_PYTHON.exists(), reason="no docutils ODF writer on this machine")
def test_an_odt_written_by_docutils_odf_writer_round_trips(tmp_path: Path) -> None:
    (tmp_path / "in.rst").write_text(RST)
    subprocess.run(
        [str(DOCUTILS_PYTHON), "-m", "docutils", "--writer=odt", str(tmp_path / "in.rst"), str(tmp_path / "out.odt")],
        check=True,
    )
    stored, translated = _round_trips("odt", (tmp_path / "out.odt").read_bytes())
    texts = [s.text for s in stored.segments]
    assert "A footnote with <x1>style</x1>." in texts
    assert "This is <x1>emphasis</x1>, <x2>strong</x2> and <x3>code</x3>, with a note <x4/>." in texts
    content = translated["content.xml"].decode()
    assert "WITH A NOTE <text:note" in content
    assert ">A FOOTNOTE WITH <text:span" in content and ">2.50</text:p>" in content

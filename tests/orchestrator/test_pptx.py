"""PowerPoint presentations: slides, notes and charts translated; layouts, masters, fields and media kept."""

from __future__ import annotations

import base64
import io
import json
import time
import xml.etree.ElementTree as ElementTree
import zipfile

import pytest

from contract.documents import encode_document
from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.office_runs import DRAWING, split_paragraphs
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import finish_document
from tests.orchestrator.office_files import make_pptx, members
from tests.orchestrator.test_document_formats import shout

TRANSLATED = ("ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml", "ppt/charts/chart1.xml")


def _split(data: bytes) -> tuple[str, Skeleton]:
    source = encode_document("pptx", data)
    skeleton = split_document(source, "pptx", 200)
    return source, Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it


def test_slides_notes_and_charts_go_out_as_sentences_with_formatting_as_tags() -> None:
    _, skeleton = _split(make_pptx())
    assert [s.text for s in skeleton.segments] == [
        "Quarterly results",
        # a run split by the spell-checker (err="1") is one word; a:br a tag; the same formatting joined
        "Sales grew by <x1/>twelve percent<x2/> in the nothern region.<x3/>Costs stayed flat & low.",
        "See slide <x1/> for details.",  # the slide number field is kept whole, its text untouched
        "A table cell",
        "Mention the new office.",  # notes; their slide number field alone is not sent
        "Sales by region",  # the chart's title; its cached cell values (c:v) are not
    ]


def test_the_identity_round_trip_gives_every_member_back_byte_for_byte() -> None:
    source, skeleton = _split(make_pptx())
    assert members(finish_document("pptx", skeleton.source())) == members(source)
    packed = zipfile.ZipFile(io.BytesIO(base64.b64decode(finish_document("pptx", skeleton.source()))))
    assert packed.getinfo("ppt/media/image1.png").compress_type == zipfile.ZIP_STORED


def test_a_translated_presentation_is_valid_xml_with_layouts_fields_and_media_kept() -> None:
    source, skeleton = _split(make_pptx())
    translated = members(finish_document("pptx", skeleton.assemble([shout(s.text) for s in skeleton.segments])))
    original = members(source)
    assert translated.keys() == original.keys()
    for name, content in translated.items():
        if name not in TRANSLATED:
            assert content == original[name], name  # layouts and masters keep "Click to edit Master title style"
        elif name.endswith(".xml"):
            ElementTree.fromstring(content)
    slide = translated["ppt/slides/slide1.xml"].decode()
    assert "<a:t>QUARTERLY RESULTS</a:t>" in slide
    assert '<a:t xml:space="preserve">SALES GREW BY </a:t></a:r><a:r><a:rPr lang="en-US" b="1" dirty="0"/>' in slide
    assert "<a:t>TWELVE PERCENT</a:t>" in slide and "<a:t> IN THE NOTHERN REGION.</a:t>" in slide
    assert '<a:br><a:rPr lang="en-US" dirty="0"/></a:br>' in slide and "COSTS STAYED FLAT &amp; LOW." in slide
    assert 'type="slidenum"><a:rPr lang="en-US"/><a:t>1</a:t></a:fld>' in slide
    assert "<a:t>A TABLE CELL</a:t>" in slide
    notes = translated["ppt/notesSlides/notesSlide1.xml"].decode()
    assert "MENTION THE NEW OFFICE." in notes and "<a:t>1</a:t></a:fld>" in notes
    chart = translated["ppt/charts/chart1.xml"].decode()
    assert "<a:t>SALES BY REGION</a:t>" in chart and "<c:v>Revenue</c:v>" in chart


def _zip_without_presentation() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("ppt/slides/slide1.xml", "<x/>")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not a zip at all", r"not a \.pptx file \(not a zip archive"),
        (_zip_without_presentation(), r"not a \.pptx file \(a PowerPoint presentation\): it has no ppt/presentation"),
        (make_pptx()[:-40], r"not a \.pptx file \(not a zip archive"),  # truncated: no central directory
        (make_pptx().replace(b"PK\x01\x02", b"PK\x09\x09", 1), r"\.pptx"),  # a damaged central directory
    ],
)
def test_a_file_that_is_not_a_presentation_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        split_document(base64.b64encode(data).decode(), "pptx", 200)


def test_a_paragraph_of_unclosed_fields_is_split_in_linear_time() -> None:
    # Each unclosed a:fld once made the field pattern scan to the paragraph's end: 6,000 took ~20 s, now well under 1.
    fields = '<a:fld id="1"><a:r><a:t>x</a:t></a:r>' * 6_000
    skeleton = Skeleton()
    started = time.perf_counter()
    split_paragraphs(f'<x xmlns:a="{DRAWING.namespaces[0]}"><a:p>{fields}</a:p></x>', DRAWING, 200, skeleton)
    assert time.perf_counter() - started < 5
    assert skeleton.source().count("<a:fld") == 6_000

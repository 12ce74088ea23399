"""Content that is only whitespace once decoded (``&nbsp;``, ``&#x2003;``, ``"\\u00a0"``) is kept as it is.

One rule for every format: text with no letter in it after its entities and escapes are read is
never a segment (the model has nothing to translate, and a job of only whitespace is refused), so
a table cell of ``&nbsp;`` cannot fail its document.
"""

from __future__ import annotations

import base64
import html
import io
import zipfile

import pytest

from contract.documents import ZIPPED_FORMATS, encode_document
from contract.inline_tags import TAG
from contract.schemas import validate_text
from orchestrator.segmenting import split_document
from tests.orchestrator.office_files import make_pptx
from tests.orchestrator.test_opendocument import make_odf

WORD_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _docx(body: str) -> str:
    members = {
        "[Content_Types].xml": '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/'
        'package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
        'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"'
        "/></Types>",
        "word/document.xml": f'<?xml version="1.0"?>\n<w:document {WORD_NS}><w:body>{body}</w:body></w:document>',
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return encode_document("docx", buffer.getvalue())


CASES = {
    "html table cell": ("html", "<table><tr><td>&nbsp;</td><td>Name</td></tr></table>"),
    "html paragraph": ("html", "<p>&#x2003;</p><p>Words here.</p>"),
    "html em space in markup": ("html", "<p><b>&ensp;</b><i>&thinsp;</i></p><p>Words.</p>"),
    "html cells": ("html", "<tr><td> &nbsp;&nbsp; </td><th>&#160;</th><td>\u00a0</td></tr>"),
    "html alt": ("html", '<p>See <img alt="&nbsp;" src="a.png"> here.</p><img alt="&#x2003;" src="b.png">'),
    "html attribute": ("html", '<p title="&nbsp;">Text.</p>'),
    "md entities": ("md", "# Title\n\n&nbsp;\n\n| a | b |\n|---|---|\n| &#x2003; | cell |\n\nText <b>&nbsp;</b>\n"),
    "json": ("json", '{"a": "\\u00a0", "b": "\\u2003\\n", "c": "Hello"}'),
    "json icu branch": ("json", '{"a": "{n, plural, one {\\u00a0} other {# files}}"}'),
    "po": ("po", 'msgid "&nbsp;"\nmsgstr ""\n\nmsgid "<b>&#x2003;</b>"\nmsgstr ""\n'),
    "xliff 1.2": (
        "xliff",
        '<?xml version="1.0"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        '<file source-language="en" datatype="plaintext" original="x"><body>'
        '<trans-unit id="1"><source>&#x2003;</source></trans-unit>'
        '<trans-unit id="2"><source>Hello</source></trans-unit></body></file></xliff>\n',
    ),
    "xliff 2.0": (
        "xliff",
        '<?xml version="1.0"?>\n<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en">'
        '<file id="f"><unit id="1"><segment><source>&#xA0;</source></segment></unit></file></xliff>\n',
    ),
    "srt": ("srt", "1\n00:00:01,000 --> 00:00:02,000\n&nbsp;\n\n2\n00:00:03,000 --> 00:00:04,000\nHello.\n"),
    "vtt": ("vtt", "WEBVTT\n\n00:01.000 --> 00:02.000\n<i>&#x2003;</i>\n"),
    "txt": ("txt", "Title\n\n&nbsp;\n\n\u00a0\u2003\n"),
    "odt": ("odt", "<text:p>&#x2003;</text:p><text:p><text:span>&#160;</text:span></text:p><text:p>Words.</text:p>"),
    "pptx": ("pptx", "<a:p><a:r><a:t>&#xA0;</a:t></a:r></a:p><a:p><a:r><a:t>Words.</a:t></a:r></a:p>"),
    "docx": (
        "docx",
        '<w:p><w:r><w:t xml:space="preserve"> </w:t></w:r></w:p><w:p><w:r><w:t>&#x2003;</w:t></w:r></w:p>',
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_whitespace_only_content_is_kept_as_it_is(case: str) -> None:
    fmt, source = CASES[case]
    if fmt == "docx":
        source = _docx(source)
    elif fmt == "odt":
        source = encode_document("odt", make_odf("text", source))
    elif fmt == "pptx":
        source = encode_document("pptx", make_pptx(source))
    skeleton = split_document(source, fmt, 200)
    for segment in skeleton.segments:
        validate_text(segment.text, 10_000)  # what the job would refuse: whitespace only
        assert any(c.isalpha() for c in html.unescape(TAG.sub("", segment.text))), segment
    if fmt not in ZIPPED_FORMATS:  # a zipped format's container text is checked by split_document itself
        assert skeleton.source() == source
    translated = skeleton.assemble([s.text.upper() for s in skeleton.segments], "fr")
    if fmt not in ZIPPED_FORMATS:
        for kept in ("&nbsp;", "&#x2003;", "\\u00a0", "&#xA0;"):
            assert translated.count(kept) == source.count(kept)
    else:
        assert base64.b64decode(translated)  # still the container text, not an error


def test_decoded_letters_are_still_translated() -> None:
    skeleton = split_document("<p>Caf&eacute; &amp; bar</p>", "html", 200)
    assert [s.text for s in skeleton.segments] == ["Café & bar"]

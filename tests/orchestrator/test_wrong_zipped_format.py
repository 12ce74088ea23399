"""A zipped file sent as another zipped format: the error names, as text, the format it really is.

Before, an ``.ods`` sent as ``.odt`` said ``its mimetype is b'application/vnd.oasis.opendocument.spreadsheet'``
(Python's bytes), and a ``.docx`` sent as ``.pptx`` only that it had no ``ppt/presentation.xml``.
"""

from __future__ import annotations

import pytest

from contract.documents import encode_document
from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from tests.orchestrator.office_files import make_pptx
from tests.orchestrator.test_document_formats import make_docx
from tests.orchestrator.test_epub import build_epub
from tests.orchestrator.test_opendocument import ODS_BODY, ODT_BODY, make_odf


@pytest.mark.parametrize(
    ("data", "sent_as", "message"),
    [
        (
            make_odf("spreadsheet", ODS_BODY),
            "odt",
            "this file is an OpenDocument spreadsheet (.ods), not a .odt: send it as .ods",
        ),
        (
            make_odf("text", ODT_BODY),
            "odp",
            "this file is an OpenDocument text document (.odt), not a .odp: send it as .odt",
        ),
        (make_docx(), "pptx", "this file is a Word document (.docx), not a .pptx: send it as .docx"),
        (make_pptx(), "odt", "this file is a PowerPoint presentation (.pptx), not a .odt: send it as .pptx"),
    ],
)
def test_a_file_of_another_zipped_format_is_named(data: bytes, sent_as: str, message: str) -> None:
    with pytest.raises(InvalidJobError) as raised:
        split_document(encode_document(sent_as, data), sent_as, 200)
    assert str(raised.value) == message


def test_an_unknown_mimetype_is_shown_as_text() -> None:
    book = build_epub({"META-INF/container.xml": "<container/>"}, mimetype=b"application/zip\n")
    with pytest.raises(InvalidJobError) as raised:
        split_document(encode_document("epub", book), "epub", 200)
    assert str(raised.value) == (
        "this is not a .epub file (an EPUB e-book): its mimetype is application/zip, not application/epub+zip"
    )

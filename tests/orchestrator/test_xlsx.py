"""Excel workbooks: cell text and comments translated; formulas, numbers, sheet names and styles kept."""

from __future__ import annotations

import base64
import io
import json
import re
import xml.etree.ElementTree as ElementTree
import zipfile

import pytest

from contract.documents import encode_document
from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import finish_document
from tests.orchestrator.office_files import make_xlsx, members, table_members
from tests.orchestrator.test_document_formats import shout

TRANSLATED = ("xl/sharedStrings.xml", "xl/worksheets/sheet1.xml", "xl/comments1.xml")
_FORMULA = re.compile(rb"<f>.*?</f>|<v>.*?</v>")


def _split(data: bytes) -> tuple[str, Skeleton]:
    source = encode_document("xlsx", data)
    skeleton = split_document(source, "xlsx", 200)
    return source, Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it


def _translated(data: bytes) -> dict[str, bytes]:
    _, skeleton = _split(data)
    return members(finish_document("xlsx", skeleton.assemble([shout(s.text) for s in skeleton.segments])))


def test_shared_inline_and_comment_text_goes_out_and_numbers_and_codes_stay() -> None:
    _, skeleton = _split(make_xlsx())
    assert [s.text for s in skeleton.segments] == [
        "Inline note here",  # a sheet's inline string
        "Product",
        "Price",
        "Total <x1/>due<x2/> now",  # rich text: a formatting change is a tag
        "Indented apple",  # "2024-01" has no letters: not sent
        "Line one<x1/>Line two",  # a newline in a cell is a line break, not a space
        "Tea<x1/>green",  # _x0009_ (an escaped tab) is kept out of the model's hands
        "Ann Lee:<x1/><x2/>Check this price.",
    ]


def test_the_identity_round_trip_gives_every_member_back_byte_for_byte() -> None:
    source, skeleton = _split(make_xlsx())
    assert members(finish_document("xlsx", skeleton.source())) == members(source)


def test_a_translated_workbook_keeps_formulas_numbers_sheet_names_and_whitespace() -> None:
    original = members(make_xlsx())
    translated = _translated(make_xlsx())
    assert translated.keys() == original.keys()
    for name, content in translated.items():
        if name not in TRANSLATED:
            assert content == original[name], name  # the workbook (sheet names, defined names), styles, rels
        ElementTree.fromstring(content)
    sheet = translated["xl/worksheets/sheet1.xml"]
    assert _FORMULA.findall(sheet) == _FORMULA.findall(original["xl/worksheets/sheet1.xml"])
    assert b'<f>IF(B2&gt;10,"big","small")</f><v>big</v>' in sheet
    assert b"<is><t>INLINE NOTE HERE</t></is>" in sheet
    shared = translated["xl/sharedStrings.xml"].decode()
    assert "<si><t>PRODUCT</t></si><si><t>PRICE</t></si>" in shared
    assert '<t xml:space="preserve">TOTAL </t></r><r><rPr><b/>' in shared and "<t>DUE</t>" in shared
    assert "<si><t>2024-01</t></si>" in shared
    assert '<si><t xml:space="preserve">  INDENTED APPLE  </t></si>' in shared  # preserved whitespace kept
    assert "<si><t>LINE ONE\nLINE TWO</t></si>" in shared and "<si><t>TEA_x0009_GREEN</t></si>" in shared
    assert shared.count("<si>") == 7  # the shared string indexes the cells use still point at the same strings
    assert "CHECK THIS PRICE." in translated["xl/comments1.xml"].decode()
    workbook = translated["xl/workbook.xml"].decode()
    assert '<sheet name="Price list"' in workbook and "'Price list'!$C$2" in workbook


def test_a_workbook_written_with_a_prefix_for_spreadsheetml_is_read_too() -> None:
    shared = "<x:si><x:t>Written by a library</x:t></x:si>"
    data = make_xlsx(shared=shared)
    archive = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        for name in archive.namelist():
            content = archive.read(name)
            if name == "xl/sharedStrings.xml":
                content = content.replace(b"<sst xmlns=", b"<x:sst xmlns:x=").replace(b"</sst>", b"</x:sst>")
            out.writestr(name, content)
    _, skeleton = _split(buffer.getvalue())
    assert "Written by a library" in [s.text for s in skeleton.segments]
    translated = _translated(buffer.getvalue())
    assert b"<x:si><x:t>WRITTEN BY A LIBRARY</x:t></x:si>" in translated["xl/sharedStrings.xml"]


def test_a_formula_is_never_sent_even_next_to_an_inline_string() -> None:
    row = '<row r="1"><c r="A1" t="str"><f>CONCAT("Hello ","world")</f><v>Hello world</v></c></row>'
    _, skeleton = _split(make_xlsx(shared="<si><t>Word</t></si>", sheet_data=row))
    assert [s.text for s in skeleton.segments] == ["Word", "Ann Lee:<x1/><x2/>Check this price."]


def _zip_without_workbook() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("xl/sharedStrings.xml", "<sst/>")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not a zip at all", r"not a \.xlsx file \(not a zip archive"),
        (_zip_without_workbook(), r"not a \.xlsx file \(an Excel workbook\): it has no xl/workbook\.xml"),
        (make_xlsx()[: len(make_xlsx()) // 2], r"not a \.xlsx file \(not a zip archive"),  # truncated
    ],
)
def test_a_file_that_is_not_a_workbook_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        split_document(base64.b64encode(data).decode(), "xlsx", 200)


def test_the_header_cells_of_an_excel_table_keep_the_names_its_columns_have() -> None:
    # A1 "Product" and B1 "Price" head the table Prices: Excel repairs a workbook whose header cells differ
    # from the table's column names, and formulas say Prices[Price]. A3 ("Total due now") is a plain cell.
    data = make_xlsx(extra=table_members("A1:B2"))
    _, skeleton = _split(data)
    sent = [s.text for s in skeleton.segments]
    assert "Product" not in sent and "Price" not in sent
    assert "Total <x1/>due<x2/> now" in sent and "Indented apple" in sent  # A2, A3: the table's body and below
    shared = _translated(data)["xl/sharedStrings.xml"].decode()
    assert "<si><t>Product</t></si><si><t>Price</t></si>" in shared and "INDENTED APPLE" in shared
    source, skeleton = _split(data)
    assert members(finish_document("xlsx", skeleton.source())) == members(source)


def test_an_inline_header_cell_and_a_totals_row_of_a_table_stay_too() -> None:
    row1 = '<row r="1"><c r="A1" t="inlineStr"><is><t>Product</t></is></c><c r="B1" t="s"><v>1</v></c></row>'
    row2 = '<row r="2"><c r="A2" t="inlineStr"><is><t>Green tea</t></is></c><c r="B2"><v>3</v></c></row>'
    row3 = '<row r="3"><c r="A3" t="inlineStr"><is><t>Total</t></is></c><c r="B3"><f>SUBTOTAL(109,B2)</f></c></row>'
    shared = "<si><t>Product name</t></si><si><t>Price</t></si>"
    data = make_xlsx(shared, row1 + row2 + row3, extra=table_members("A1:B3", totals=True))
    _, skeleton = _split(data)
    assert [s.text for s in skeleton.segments] == [
        "Green tea",
        "Product name",  # a shared string no header cell shows
        "Ann Lee:<x1/><x2/>Check this price.",
    ]
    sheet = _translated(data)["xl/worksheets/sheet1.xml"].decode()
    assert "<is><t>Product</t></is>" in sheet and "<is><t>GREEN TEA</t></is>" in sheet and "<t>Total</t>" in sheet

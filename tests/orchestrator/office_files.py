"""Small PowerPoint and Excel files built in code, written as PowerPoint and Excel write them."""

from __future__ import annotations

import base64
import io
import zipfile

DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\r\n'
_PACKAGE = "http://schemas.openxmlformats.org/package/2006"
_OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PRESENTATION_NS = (
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    f'xmlns:r="{_OFFICE}" '
    'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
)
SPREADSHEET_NS = f'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="{_OFFICE}"'


def _zip(members: dict[str, str | bytes], stored: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content, compress_type=zipfile.ZIP_STORED if name in stored else None)
    return buffer.getvalue()


def members(document: str | bytes) -> dict[str, bytes]:
    """A zipped document's members by name (``document``: base64 text or the bytes)."""
    data = base64.b64decode(document) if isinstance(document, str) else document
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {name: archive.read(name) for name in archive.namelist()}


def _shape(shape_id: int, name: str, paragraphs: str, placeholder: str = "") -> str:
    ph = f"<p:nvPr><p:ph {placeholder}/></p:nvPr>" if placeholder else "<p:nvPr/>"
    return (
        f'<p:sp><p:nvSpPr><p:cNvPr id="{shape_id}" name="{name}"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr>'
        f"{ph}</p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/>{paragraphs}</p:txBody></p:sp>"
    )


def _slide_xml(root: str, shapes: str) -> str:
    return (
        f"{DECLARATION}<p:{root} {PRESENTATION_NS}><p:cSld><p:spTree><p:nvGrpSpPr>"
        '<p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>'
        f"{shapes}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:{root}>"
    )


SLIDE_TITLE = '<a:p><a:r><a:rPr lang="en-US" dirty="0"/><a:t>Quarterly results</a:t></a:r></a:p>'
SLIDE_BODY = (
    '<a:p><a:r><a:rPr lang="en-US" dirty="0"/><a:t xml:space="preserve">Sales grew by </a:t></a:r>'
    '<a:r><a:rPr lang="en-US" b="1" dirty="0"/><a:t>twelve percent</a:t></a:r>'
    '<a:r><a:rPr lang="en-US" dirty="0"/><a:t> in the </a:t></a:r>'
    '<a:r><a:rPr lang="en-US" dirty="0" err="1"/><a:t>nothern</a:t></a:r>'
    '<a:r><a:rPr lang="en-US" dirty="0"/><a:t> region.</a:t></a:r>'
    '<a:br><a:rPr lang="en-US" dirty="0"/></a:br>'
    '<a:r><a:rPr lang="en-US" dirty="0"/><a:t>Costs stayed flat &amp; low.</a:t></a:r>'
    '<a:endParaRPr lang="en-US" dirty="0"/></a:p>'
    '<a:p><a:pPr lvl="1"/><a:r><a:rPr lang="en-US"/><a:t xml:space="preserve">See slide </a:t></a:r>'
    '<a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum"><a:rPr lang="en-US"/>'
    '<a:t>1</a:t></a:fld><a:r><a:rPr lang="en-US"/><a:t> for details.</a:t></a:r></a:p>'
)
SLIDE_TABLE = (
    '<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="4" name="Table 3"/><p:cNvGraphicFramePr/><p:nvPr/>'
    '</p:nvGraphicFramePr><p:xfrm/><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/'
    '2006/table"><a:tbl><a:tblGrid><a:gridCol w="3048000"/></a:tblGrid><a:tr h="370840"><a:tc><a:txBody>'
    '<a:bodyPr/><a:lstStyle/><a:p><a:r><a:rPr lang="en-US"/><a:t>A table cell</a:t></a:r></a:p></a:txBody>'
    "<a:tcPr/></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>"
)
NOTES = (
    '<a:p><a:r><a:rPr lang="en-US"/><a:t>Mention the new office.</a:t></a:r></a:p>'
    '<a:p><a:fld id="{1}" type="slidenum"><a:rPr lang="en-US"/><a:t>1</a:t></a:fld>'
    '<a:endParaRPr lang="en-US"/></a:p>'
)
MASTER_PROMPT = '<a:p><a:r><a:rPr lang="en-US"/><a:t>Click to edit Master title style</a:t></a:r></a:p>'
CHART = (
    f'{DECLARATION}<c:chartSpace xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" {PRESENTATION_NS}>'
    "<c:chart><c:title><c:tx><c:rich><a:bodyPr/><a:lstStyle/><a:p><a:pPr><a:defRPr/></a:pPr>"
    '<a:r><a:rPr lang="en-US"/><a:t>Sales by region</a:t></a:r></a:p></c:rich></c:tx></c:title><c:plotArea>'
    '<c:barChart><c:ser><c:tx><c:strRef><c:f>Sheet1!$B$1</c:f><c:strCache><c:ptCount val="1"/><c:pt idx="0">'
    "<c:v>Revenue</c:v></c:pt></c:strCache></c:strRef></c:tx></c:ser></c:barChart></c:plotArea></c:chart>"
    "</c:chartSpace>"
)


def make_pptx(body: str = SLIDE_BODY) -> bytes:
    """A one-slide presentation: a title, a body, a table, notes, a chart, a layout and master, an image."""
    rels = f'<Relationships xmlns="{_PACKAGE}/relationships">'
    content_types = (
        f'{DECLARATION}<Types xmlns="{_PACKAGE}/content-types"><Default Extension="rels" ContentType="application/'
        'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        '<Default Extension="png" ContentType="image/png"/><Override PartName="/ppt/presentation.xml" ContentType='
        '"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/></Types>'
    )
    slide = _shape(2, "Title 1", SLIDE_TITLE, 'type="title"') + _shape(3, "Content 2", body, 'idx="1"') + SLIDE_TABLE
    return _zip(
        {
            "[Content_Types].xml": content_types,
            "_rels/.rels": f'{DECLARATION}{rels}<Relationship Id="rId1" Type="{_OFFICE}/officeDocument" '
            'Target="ppt/presentation.xml"/></Relationships>',
            "ppt/presentation.xml": f"{DECLARATION}<p:presentation {PRESENTATION_NS}><p:sldMasterIdLst><p:sldMasterId "
            'id="2147483648" r:id="rId1"/></p:sldMasterIdLst><p:sldIdLst><p:sldId id="256" r:id="rId2"/></p:sldIdLst>'
            '<p:sldSz cx="12192000" cy="6858000"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>',
            "ppt/_rels/presentation.xml.rels": f'{DECLARATION}{rels}<Relationship Id="rId1" Type="{_OFFICE}/'
            'slideMaster" Target="slideMasters/slideMaster1.xml"/><Relationship Id="rId2" Type="'
            f'{_OFFICE}/slide" Target="slides/slide1.xml"/></Relationships>',
            "ppt/slides/slide1.xml": _slide_xml("sld", slide),
            "ppt/notesSlides/notesSlide1.xml": _slide_xml("notes", _shape(2, "Notes 1", NOTES, 'type="body"')),
            "ppt/slideLayouts/slideLayout1.xml": _slide_xml("sldLayout", _shape(2, "T", MASTER_PROMPT, 'type="title"')),
            "ppt/slideMasters/slideMaster1.xml": _slide_xml("sldMaster", _shape(2, "T", MASTER_PROMPT, 'type="title"')),
            "ppt/charts/chart1.xml": CHART,
            "ppt/media/image1.png": b"\x89PNG\r\n\x1a\n not really",
        },
        stored=("ppt/media/image1.png",),
    )


SHARED_STRINGS = (
    "<si><t>Product</t></si>"
    "<si><t>Price</t></si>"
    '<si><r><t xml:space="preserve">Total </t></r><r><rPr><b/><sz val="11"/><color theme="1"/>'
    '<rFont val="Calibri"/><family val="2"/><scheme val="minor"/></rPr><t>due</t></r>'
    '<r><rPr><sz val="11"/><rFont val="Calibri"/></rPr><t xml:space="preserve"> now</t></r></si>'
    "<si><t>2024-01</t></si>"
    '<si><t xml:space="preserve">  Indented apple  </t></si>'
    "<si><t>Line one\nLine two</t></si>"
    "<si><t>Tea_x0009_green</t></si>"
)
SHEET_DATA = (
    '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c>'
    '<c r="E1" t="inlineStr"><is><t>Inline note here</t></is></c></row>'
    '<row r="2"><c r="A2" t="s"><v>4</v></c><c r="B2"><v>12.5</v></c>'
    '<c r="C2"><f>SUM(B2:B3)</f><v>30</v></c><c r="D2" t="str"><f>IF(B2&gt;10,"big","small")</f><v>big</v></c></row>'
    '<row r="3"><c r="A3" t="s"><v>2</v></c><c r="B3" s="1"><v>45292</v></c><c r="C3" t="s"><v>3</v></c>'
    '<c r="D3" t="s"><v>5</v></c><c r="E3" t="s"><v>6</v></c></row>'
)
COMMENTS = (
    f"{DECLARATION}<comments {SPREADSHEET_NS}><authors><author>Ann Lee</author></authors><commentList>"
    '<comment ref="B2" authorId="0"><text><r><rPr><b/><sz val="9"/><rFont val="Tahoma"/></rPr>'
    '<t xml:space="preserve">Ann Lee:</t></r><r><rPr><sz val="9"/><rFont val="Tahoma"/></rPr>'
    '<t xml:space="preserve">\nCheck this price.</t></r></text></comment></commentList></comments>'
)
WORKBOOK = (
    f'{DECLARATION}<workbook {SPREADSHEET_NS}><sheets><sheet name="Price list" sheetId="1" r:id="rId1"/>'
    "</sheets><definedNames><definedName name=\"Total\">'Price list'!$C$2</definedName></definedNames>"
    '<calcPr calcId="191029"/></workbook>'
)


def make_xlsx(
    shared: str = SHARED_STRINGS, sheet_data: str = SHEET_DATA, extra: dict[str, str | bytes] | None = None
) -> bytes:
    """A one-sheet workbook: shared strings (plain, rich, numbers), an inline string, formulas, a comment.

    ``extra``: more members (a table and the sheet's relationships to it).
    """
    rels = f'<Relationships xmlns="{_PACKAGE}/relationships">'
    content_types = (
        f'{DECLARATION}<Types xmlns="{_PACKAGE}/content-types"><Default Extension="rels" ContentType="application/'
        'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        'spreadsheetml.sheet.main+xml"/></Types>'
    )
    count = shared.count("<si>")
    return _zip(
        {
            "[Content_Types].xml": content_types,
            "_rels/.rels": f'{DECLARATION}{rels}<Relationship Id="rId1" Type="{_OFFICE}/officeDocument" '
            'Target="xl/workbook.xml"/></Relationships>',
            "xl/workbook.xml": WORKBOOK,
            "xl/_rels/workbook.xml.rels": f'{DECLARATION}{rels}<Relationship Id="rId1" Type="{_OFFICE}/worksheet" '
            'Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="{_OFFICE}/sharedStrings" '
            'Target="sharedStrings.xml"/></Relationships>',
            "xl/worksheets/sheet1.xml": f'{DECLARATION}<worksheet {SPREADSHEET_NS}><dimension ref="A1:E3"/>'
            f"<sheetData>{sheet_data}</sheetData></worksheet>",
            "xl/sharedStrings.xml": f'{DECLARATION}<sst {SPREADSHEET_NS} count="{count}" uniqueCount="{count}">'
            f"{shared}</sst>",
            "xl/comments1.xml": COMMENTS,
            "xl/styles.xml": f'{DECLARATION}<styleSheet {SPREADSHEET_NS}><numFmts count="0"/></styleSheet>',
            **(extra or {}),
        }
    )


def table_members(ref: str = "A1:B3", totals: bool = False) -> dict[str, str | bytes]:
    """An Excel table over ``ref`` of sheet 1 (columns named Product and Price), and the sheet's link to it."""
    totals_attribute = ' totalsRowCount="1"' if totals else ""
    return {
        "xl/worksheets/_rels/sheet1.xml.rels": f'{DECLARATION}<Relationships xmlns="{_PACKAGE}/relationships">'
        f'<Relationship Id="rId1" Type="{_OFFICE}/table" Target="../tables/table1.xml"/></Relationships>',
        "xl/tables/table1.xml": f'{DECLARATION}<table {SPREADSHEET_NS} id="1" name="Prices" displayName="Prices" '
        f'ref="{ref}"{totals_attribute}><autoFilter ref="{ref}"/><tableColumns count="2">'
        '<tableColumn id="1" name="Product"/><tableColumn id="2" name="Price"/></tableColumns>'
        '<tableStyleInfo name="TableStyleMedium2" showFirstColumn="0" showLastColumn="0" showRowStripes="1" '
        'showColumnStripes="0"/></table>',
    }

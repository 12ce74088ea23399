"""Documents of a chosen size in every format dragoman translates, built from the project's own prose.

``bench.documents --per-format`` times the splitters on them: the machine's corpus has no
PowerPoint, Excel, XLIFF or EPUB file, so each format gets a document of about N MB of text or
XML written here. The prose is real: the paragraphs of ``bench/samples/README.md`` and of the
guides under ``docs/`` (plain paragraphs only: no code, tables, lists or headings), repeated as
often as the size asks. One word of every paragraph carries the format's inline markup (bold,
a span, a ``<g>`` code) so the splitters also pair tags. The zipped formats are written with
:mod:`zipfile` and the few XML members each needs, as Word, PowerPoint, Excel, LibreOffice and
Sigil write them (the same shapes as the test builders, which a benchmark may not import).
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
_PROSE_FILES = (ROOT / "bench" / "samples" / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
_NOT_PROSE = re.compile(r"\s*(?:[#>|`*+-]|\d+[.)]|    )")
_MARKUP = re.compile(r"[`|<>\\{}]|\]\(|\*\*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PER_SLIDE = 20  # paragraphs on one slide, one chapter (x 10) or one presentation page
_PER_SECTION = 10  # paragraphs under one heading (HTML, Markdown, JSON objects, Word headings)
_DECLARATION = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\r\n'
_PACKAGE = "http://schemas.openxmlformats.org/package/2006"
_OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_WORD_NS = f'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="{_OFFICE}"'
_PRESENTATION_NS = (
    f'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="{_OFFICE}" '
    'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
)
_SPREADSHEET_NS = f'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="{_OFFICE}"'
_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"'
)


@cache
def prose() -> tuple[str, ...]:
    """The plain paragraphs of the sample README and the docs, each joined onto one line."""
    paragraphs: list[str] = []
    for path in _PROSE_FILES:
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            lines = block.strip().splitlines()
            if not lines or _NOT_PROSE.match(lines[0]):
                continue
            text = " ".join(line.strip() for line in lines)
            if len(text) >= 80 and not _MARKUP.search(text):
                paragraphs.append(text)
    return tuple(paragraphs)


def _marked(paragraph: str) -> tuple[str, str, str]:
    """The paragraph cut around its fourth word, which the builders put inside inline markup."""
    words = paragraph.split(" ")
    return " ".join(words[:3]) + " ", words[3], " " + " ".join(words[4:])


def _xml(paragraph: str, before: str, after: str) -> str:
    """The paragraph as XML text with its fourth word between ``before`` and ``after``."""
    head, word, tail = (escape(part) for part in _marked(paragraph))
    return f"{head}{before}{word}{after}{tail}"


def _zip(members: dict[str, str | bytes], mimetype: str = "") -> bytes:
    """A zip of ``members`` (deflated), after an uncompressed ``mimetype`` member when one is given."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if mimetype:
            archive.writestr("mimetype", mimetype, compress_type=zipfile.ZIP_STORED)
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def _chunks(paragraphs: list[str], size: int) -> list[list[str]]:
    """``paragraphs`` in consecutive groups of ``size`` (slides, chapters, sections)."""
    return [paragraphs[i : i + size] for i in range(0, len(paragraphs), size)]


def _txt(paragraphs: list[str]) -> str:
    return "".join(f"{p}\n\n" for p in paragraphs)


def _md(paragraphs: list[str]) -> str:
    out = ["# Prose\n\n"]
    for number, section in enumerate(_chunks(paragraphs, _PER_SECTION), 1):
        out.append(f"## Section {number}\n\n")
        out += ["{}**{}**{}\n\n".format(*_marked(p)) for p in section]
    return "".join(out)


def _html(paragraphs: list[str]) -> str:
    out = ['<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Prose</title></head>\n<body>\n']
    for number, section in enumerate(_chunks(paragraphs, _PER_SECTION), 1):
        out.append(f"<h2>Section {number}</h2>\n")
        out += [f"<p>{_xml(p, '<b>', '</b>')}</p>\n" for p in section]
    return "".join(out) + "</body>\n</html>\n"


def _sentences(paragraphs: list[str]) -> list[str]:
    return [s for p in paragraphs for s in _SENTENCE_END.split(p)]


def _time(seconds: int, separator: str) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{separator}000"


def _srt(paragraphs: list[str]) -> str:
    return "".join(
        f"{n}\n{_time(2 * n, ',')} --> {_time(2 * n + 1, ',')}\n{s}\n\n"
        for n, s in enumerate(_sentences(paragraphs), 1)
    )


def _vtt(paragraphs: list[str]) -> str:
    cues = (
        f"{_time(2 * n, '.')} --> {_time(2 * n + 1, '.')}\n{s}\n\n" for n, s in enumerate(_sentences(paragraphs), 1)
    )
    return "WEBVTT\n\n" + "".join(cues)


def _po(paragraphs: list[str]) -> str:
    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n"Language: \\n"\n\n'
    return header + "".join(
        f'msgctxt "paragraph {n}"\nmsgid {json.dumps(p, ensure_ascii=False)}\nmsgstr ""\n\n'
        for n, p in enumerate(paragraphs, 1)
    )


def _json(paragraphs: list[str]) -> str:
    sections = {
        f"section-{n}": {f"paragraph-{m}": p for m, p in enumerate(section, 1)}
        for n, section in enumerate(_chunks(paragraphs, _PER_SECTION), 1)
    }
    return json.dumps(sections, indent=2, ensure_ascii=False) + "\n"


_G = ('<g id="1">', "</g>")


def _xliff(paragraphs: list[str]) -> str:
    units = "".join(
        f'    <trans-unit id="{n}"><source>{_xml(p, *_G)}</source></trans-unit>\n' for n, p in enumerate(paragraphs, 1)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">\n'
        '  <file source-language="en" target-language="fr" datatype="plaintext" original="prose.txt">\n  <body>\n'
        f"{units}  </body>\n  </file>\n</xliff>\n"
    )


def _content_types(main: str, content_type: str) -> str:
    return (
        f'{_DECLARATION}<Types xmlns="{_PACKAGE}/content-types"><Default Extension="rels" ContentType="application/'
        'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/{main}" ContentType="{content_type}"/></Types>'
    )


def _relationships(*targets: tuple[str, str]) -> str:
    links = "".join(
        f'<Relationship Id="rId{n}" Type="{_OFFICE}/{kind}" Target="{target}"/>'
        for n, (kind, target) in enumerate(targets, 1)
    )
    return f'{_DECLARATION}<Relationships xmlns="{_PACKAGE}/relationships">{links}</Relationships>'


def _docx(paragraphs: list[str]) -> bytes:
    body: list[str] = []
    for number, section in enumerate(_chunks(paragraphs, _PER_SECTION), 1):
        body.append(f'<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>Section {number}</w:t></w:r></w:p>')
        body += [
            '<w:p><w:r><w:t xml:space="preserve">'
            + _xml(p, "</w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>", '</w:t></w:r><w:r><w:t xml:space="preserve">')
            + "</w:t></w:r></w:p>"
            for p in section
        ]
    document = f"{_DECLARATION}<w:document {_WORD_NS}><w:body>{''.join(body)}<w:sectPr/></w:body></w:document>"
    return _zip(
        {
            "[Content_Types].xml": _content_types(
                "word/document.xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
            ),
            "_rels/.rels": _relationships(("officeDocument", "word/document.xml")),
            "word/document.xml": document,
        }
    )


def _slide(title: str, paragraphs: list[str]) -> str:
    runs = "".join(
        "<a:p>{}</a:p>".format(
            _xml(
                p, '</a:t></a:r><a:r><a:rPr lang="en-US" b="1"/><a:t>', '</a:t></a:r><a:r><a:rPr lang="en-US"/><a:t>'
            ).join(['<a:r><a:rPr lang="en-US"/><a:t>', "</a:t></a:r>"])
        )
        for p in paragraphs
    )
    shapes = "".join(
        f'<p:sp><p:nvSpPr><p:cNvPr id="{shape_id}" name="{name}"/><p:cNvSpPr/><p:nvPr><p:ph {placeholder}/></p:nvPr>'
        f"</p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/>{text}</p:txBody></p:sp>"
        for shape_id, name, placeholder, text in (
            (2, "Title 1", 'type="title"', f'<a:p><a:r><a:rPr lang="en-US"/><a:t>{title}</a:t></a:r></a:p>'),
            (3, "Content 2", 'idx="1"', runs),
        )
    )
    return (
        f'{_DECLARATION}<p:sld {_PRESENTATION_NS}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/>'
        f"<p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>{shapes}</p:spTree></p:cSld></p:sld>"
    )


def _pptx(paragraphs: list[str]) -> bytes:
    slides = {
        f"ppt/slides/slide{n}.xml": _slide(f"Slide {n}", group)
        for n, group in enumerate(_chunks(paragraphs, _PER_SLIDE), 1)
    }
    ids = "".join(f'<p:sldId id="{255 + n}" r:id="rId{n}"/>' for n in range(1, len(slides) + 1))
    return _zip(
        {
            "[Content_Types].xml": _content_types(
                "ppt/presentation.xml",
                "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml",
            ),
            "_rels/.rels": _relationships(("officeDocument", "ppt/presentation.xml")),
            "ppt/presentation.xml": f"{_DECLARATION}<p:presentation {_PRESENTATION_NS}><p:sldIdLst>{ids}</p:sldIdLst>"
            '<p:sldSz cx="12192000" cy="6858000"/></p:presentation>',
            "ppt/_rels/presentation.xml.rels": _relationships(
                *(("slide", f"slides/slide{n}.xml") for n in range(1, len(slides) + 1))
            ),
            **slides,
        }
    )


def _xlsx(paragraphs: list[str]) -> bytes:
    strings = "".join(
        _xml(p, "</t></r><r><rPr><b/></rPr><t>", '</t></r><r><t xml:space="preserve">').join(
            ['<si><r><t xml:space="preserve">', "</t></r></si>"]
        )
        if n % 2
        else f"<si><t>{escape(p)}</t></si>"
        for n, p in enumerate(paragraphs)
    )
    rows = "".join(
        f'<row r="{n}"><c r="A{n}"><v>{n}</v></c><c r="B{n}" t="s"><v>{n - 1}</v></c></row>'
        for n in range(1, len(paragraphs) + 1)
    )
    count = len(paragraphs)
    return _zip(
        {
            "[Content_Types].xml": _content_types(
                "xl/workbook.xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
            ),
            "_rels/.rels": _relationships(("officeDocument", "xl/workbook.xml")),
            "xl/workbook.xml": f'{_DECLARATION}<workbook {_SPREADSHEET_NS}><sheets><sheet name="Prose" sheetId="1" '
            'r:id="rId1"/></sheets></workbook>',
            "xl/_rels/workbook.xml.rels": _relationships(
                ("worksheet", "worksheets/sheet1.xml"), ("sharedStrings", "sharedStrings.xml")
            ),
            "xl/worksheets/sheet1.xml": f'{_DECLARATION}<worksheet {_SPREADSHEET_NS}><dimension ref="A1:B{count}"/>'
            f"<sheetData>{rows}</sheetData></worksheet>",
            "xl/sharedStrings.xml": f'{_DECLARATION}<sst {_SPREADSHEET_NS} count="{count}" uniqueCount="{count}">'
            f"{strings}</sst>",
        }
    )


def _odf(subtype: str, element: str, body: str) -> bytes:
    mimetype = f"application/vnd.oasis.opendocument.{subtype}"
    declaration = '<?xml version="1.0" encoding="UTF-8"?>\n'
    manifest = (
        f'{declaration}<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" '
        f'manifest:version="1.3">\n <manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/>\n'
        ' <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>\n'
        "</manifest:manifest>"
    )
    return _zip(
        {
            "content.xml": f'{declaration}<office:document-content {_ODF_NS} office:version="1.3">'
            f"<office:automatic-styles/><office:body><{element}>{body}</{element}></office:body>"
            "</office:document-content>",
            "meta.xml": f'{declaration}<office:document-meta {_ODF_NS} office:version="1.3"><office:meta>'
            "<dc:title>Prose</dc:title></office:meta></office:document-meta>",
            "META-INF/manifest.xml": manifest,
        },
        mimetype,
    )


_SPAN = ('<text:span text:style-name="T1">', "</text:span>")


def _odt(paragraphs: list[str]) -> bytes:
    body: list[str] = []
    for number, section in enumerate(_chunks(paragraphs, _PER_SECTION), 1):
        body.append(f'<text:h text:outline-level="2">Section {number}</text:h>')
        body += [f'<text:p text:style-name="Standard">{_xml(p, *_SPAN)}</text:p>' for p in section]
    return _odf("text", "office:text", "".join(body))


def _odp(paragraphs: list[str]) -> bytes:
    pages = "".join(
        f'<draw:page draw:name="page{n}"><draw:frame svg:width="20cm" svg:height="12cm"><draw:text-box>'
        + "".join(f"<text:p>{_xml(p, *_SPAN)}</text:p>" for p in group)
        + "</draw:text-box></draw:frame></draw:page>"
        for n, group in enumerate(_chunks(paragraphs, _PER_SLIDE), 1)
    )
    return _odf("presentation", "office:presentation", pages)


def _ods(paragraphs: list[str]) -> bytes:
    rows = "".join(
        f'<table:table-row><table:table-cell office:value-type="float" office:value="{n}"><text:p>{n}</text:p>'
        f'</table:table-cell><table:table-cell office:value-type="string"><text:p>{_xml(p, *_SPAN)}</text:p>'
        "</table:table-cell></table:table-row>"
        for n, p in enumerate(paragraphs, 1)
    )
    return _odf("spreadsheet", "office:spreadsheet", f'<table:table table:name="Prose">{rows}</table:table>')


def _epub(paragraphs: list[str]) -> bytes:
    chapters = _chunks(paragraphs, _PER_SLIDE * 10)
    xhtml = '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" '
    members: dict[str, str | bytes] = {
        "META-INF/container.xml": '<?xml version="1.0"?>\n<container version="1.0" '
        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container">\n  <rootfiles>\n    <rootfile '
        'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>\n  </rootfiles>\n</container>\n',
    }
    items = "".join(
        f'    <item id="c{n}" href="Text/chapter{n}.xhtml" media-type="application/xhtml+xml"/>\n'
        for n in range(1, len(chapters) + 1)
    )
    spine = "".join(f'    <itemref idref="c{n}"/>\n' for n in range(1, len(chapters) + 1))
    members["OEBPS/content.opf"] = (
        '<?xml version="1.0" encoding="utf-8"?>\n<package version="3.0" unique-identifier="BookId" '
        'xmlns="http://www.idpf.org/2007/opf">\n  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
        '    <dc:identifier id="BookId">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier>\n'
        "    <dc:language>en</dc:language>\n    <dc:title>Prose</dc:title>\n  </metadata>\n  <manifest>\n"
        '    <item id="nav" href="Text/nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>\n'
        f"{items}  </manifest>\n  <spine>\n{spine}  </spine>\n</package>\n"
    )
    links = "".join(f'<li><a href="chapter{n}.xhtml">Chapter {n}</a></li>' for n in range(1, len(chapters) + 1))
    members["OEBPS/Text/nav.xhtml"] = (
        f'{xhtml}xmlns:epub="http://www.idpf.org/2007/ops" lang="en"><head><title>Contents</title></head>\n'
        f'<body><nav epub:type="toc"><h1>Contents</h1><ol>{links}</ol></nav></body>\n</html>\n'
    )
    for n, chapter in enumerate(chapters, 1):
        text = "".join(f"<p>{_xml(p, '<em>', '</em>')}</p>\n" for p in chapter)
        members[f"OEBPS/Text/chapter{n}.xhtml"] = (
            f'{xhtml}lang="en"><head><title>Chapter {n}</title></head>\n'
            f"<body>\n<h1>Chapter {n}</h1>\n{text}</body>\n</html>\n"
        )
    return _zip(members, "application/epub+zip")


BUILDERS: dict[str, Callable[[list[str]], str | bytes]] = {
    "txt": _txt,
    "md": _md,
    "html": _html,
    "srt": _srt,
    "vtt": _vtt,
    "po": _po,
    "json": _json,
    "xliff": _xliff,
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "odt": _odt,
    "odp": _odp,
    "ods": _ods,
    "epub": _epub,
}
"""How each format's document is written from a list of paragraphs: text, or a zip file's bytes."""


def text_bytes(document: str | bytes) -> int:
    """The size of a document's text: a text file's UTF-8 bytes, a zipped file's members unzipped."""
    if isinstance(document, str):
        return len(document.encode())
    return sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(document)).infolist())


def build(fmt: str, size: int) -> tuple[str, int, int]:
    """A ``fmt`` document of about ``size`` bytes of text or XML: the source as dragoman takes it, text and file bytes.

    A zipped format's source is its base64 text (as documents are stored). The prose is repeated
    as often as needed; the size is met within a paragraph or two of markup per paragraph.
    """
    builder = BUILDERS[fmt]
    paragraphs = list(prose())
    probe = text_bytes(builder(paragraphs))
    count = max(1, math.ceil(len(paragraphs) * size / probe))
    document = builder([paragraphs[i % len(paragraphs)] for i in range(count)])
    data = document.encode() if isinstance(document, str) else document
    source = document if isinstance(document, str) else base64.b64encode(document).decode()
    return source, text_bytes(document), len(data)

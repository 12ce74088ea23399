"""E-books (``.epub``): what the package says is translated, the rest byte for byte, XHTML still XML."""

from __future__ import annotations

import base64
import io
import json
import random
import zipfile

import pytest

from contract.documents import encode_document
from contract.errors import InvalidJobError
from contract.inline_tags import tag_problem, tokens
from orchestrator.segmenting import split_document
from orchestrator.segmenting.html_format import split_html
from orchestrator.segmenting.report import DocumentReport
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.split import finish_document
from orchestrator.segmenting.zip_container import xml_problem
from tests.orchestrator.test_document_formats import shout

CONTAINER_XML = (
    '<?xml version="1.0"?>\n<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">\n'
    '  <rootfiles>\n    <rootfile full-path="{opf}" media-type="application/oebps-package+xml"/>\n'
    "  </rootfiles>\n</container>\n"
)
XHTML_11 = '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">'

# As Calibre writes an EPUB 2 book: the OPF at the root, chapters named .html, an escaped-HTML description.
EPUB2_OPF = """<?xml version='1.0' encoding='utf-8'?>
<package xmlns="http://www.idpf.org/2007/opf" unique-identifier="uuid_id" version="2.0">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:title>The Quiet Harbour</dc:title>
    <dc:creator opf:role="aut" opf:file-as="Doe, Jane">Jane Doe</dc:creator>
    <dc:description>&lt;p&gt;A novel of the sea.&lt;/p&gt;</dc:description>
    <dc:language>en</dc:language>
    <dc:identifier id="uuid_id" opf:scheme="uuid">0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0</dc:identifier>
    <meta name="calibre:title_sort" content="Quiet Harbour, The"/>
  </metadata>
  <manifest>
    <item href="index_split_000.html" id="id1" media-type="application/xhtml+xml"/>
    <item href="Text/Chapter%202.xhtml" id="id2" media-type="application/xhtml+xml"/>
    <item href="stylesheet.css" id="css" media-type="text/css"/>
    <item href="images/cover.jpg" id="cover" media-type="image/jpeg"/>
    <item href="toc.ncx" id="ncx" media-type="application/x-dtbncx+xml"/>
  </manifest>
  <spine toc="ncx">
    <itemref idref="id1"/>
    <itemref idref="id2"/>
  </spine>
</package>
"""
EPUB2_CHAPTER = f"""<?xml version='1.0' encoding='utf-8'?>
{XHTML_11}
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en">
<head><title>Chapter One</title><link href="stylesheet.css" rel="stylesheet" type="text/css"/></head>
<body>
<h1 class="chapter"><a id="ch1"/>Chapter One</h1>
<p class="calibre1">The boat was late.&nbsp;Nobody on the pier said a word.</p>
<p class="calibre1">She read the sign: &ldquo;Closed&rdquo; &amp; <i>gone</i>.<br/>Then she left.</p>
</body>
</html>
"""
EPUB2_CHAPTER_TWO = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Two</title></head>
<body><p>The second chapter begins here.</p></body></html>
"""
EPUB2_NCX = """<?xml version='1.0' encoding='utf-8'?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1" xml:lang="en">
  <head>
    <meta content="0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0" name="dtb:uid"/>
    <meta content="2" name="dtb:depth"/>
  </head>
  <docTitle>
    <text>The Quiet Harbour</text>
  </docTitle>
  <docAuthor><text>Jane Doe</text></docAuthor>
  <navMap>
    <navPoint id="np1" playOrder="1">
      <navLabel>
        <text>Chapter One</text>
      </navLabel>
      <content src="index_split_000.html#ch1"/>
    </navPoint>
    <navPoint id="np2" playOrder="2">
      <navLabel><text>Chapter Two</text></navLabel>
      <content src="Text/Chapter%202.xhtml"/>
    </navPoint>
  </navMap>
</ncx>
"""
UNLISTED = '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><p>Not in the book.</p></body></html>'

# As Sigil writes an EPUB 3 book: OEBPS/, a nav document, a toc.ncx for older readers too.
EPUB3_OPF = """<?xml version="1.0" encoding="utf-8"?>
<package version="3.0" unique-identifier="BookId" xmlns="http://www.idpf.org/2007/opf" xml:lang="en">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:identifier id="BookId">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier>
    <dc:language>en-GB</dc:language>
    <dc:title id="title">Notes from the Garden</dc:title>
    <dc:description>Short essays about plants.</dc:description>
    <meta property="dcterms:modified">2024-05-01T10:00:00Z</meta>
  </metadata>
  <manifest>
    <item id="nav.xhtml" href="Text/nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="chapter1.xhtml" href="Text/chapter1.xhtml" media-type="application/xhtml+xml"/>
    <item id="style.css" href="Styles/style.css" media-type="text/css"/>
    <item id="font.ttf" href="Fonts/font.ttf" media-type="font/ttf"/>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
  </manifest>
  <spine toc="ncx">
    <itemref idref="chapter1.xhtml"/>
  </spine>
</package>
"""
EPUB3_NAV = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="en" xml:lang="en">
<head><title>Contents</title></head>
<body>
  <nav epub:type="toc" id="toc"><h1>Contents</h1>
    <ol><li><a href="chapter1.xhtml">Roses and Thorns</a></li></ol>
  </nav>
</body>
</html>
"""
EPUB3_CHAPTER = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" lang="en" xml:lang="en">
<head><title>Roses and Thorns</title>
<style type="text/css"><![CDATA[ p > em { color: red; } ]]></style></head>
<body>
  <section epub:type="chapter">
    <h2>Roses and Thorns</h2>
    <p>Start with <a href="#">good soil <a id="p1"/> and water</a> every day.<sup><a epub:type="noteref"
       href="#n1">1</a></sup></p>
    <p><img src="../Images/rose.jpg" alt="A red rose"/> Prune in <em>early spring</em>. Use <code>shears</code>.</p>
    <aside epub:type="footnote" id="n1"><p>Or every other day.</p></aside>
  </section>
</body>
</html>
"""
EPUB3_NCX = """<?xml version="1.0" encoding="UTF-8" standalone="no" ?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
<head><meta name="dtb:uid" content="urn:uuid:12345678-1234-1234-1234-123456789abc"/></head>
<docTitle><text>Notes from the Garden</text></docTitle>
<navMap><navPoint id="navPoint-1" playOrder="1"><navLabel><text>Roses and Thorns</text></navLabel>
<content src="Text/chapter1.xhtml"/></navPoint></navMap>
</ncx>
"""


def build_epub(members: dict[str, str | bytes], *, mimetype: bytes = b"application/epub+zip") -> bytes:
    """An EPUB: ``mimetype`` first and uncompressed, then ``members`` in order, deflated."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", mimetype, compress_type=zipfile.ZIP_STORED)
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def epub2() -> bytes:
    """A Calibre-style EPUB 2 book."""
    return build_epub(
        {
            "META-INF/container.xml": CONTAINER_XML.format(opf="content.opf"),
            "content.opf": EPUB2_OPF,
            "index_split_000.html": EPUB2_CHAPTER,
            "Text/Chapter 2.xhtml": EPUB2_CHAPTER_TWO,
            "stylesheet.css": "p.calibre1 { margin: 0 }\n",
            "images/cover.jpg": b"\xff\xd8\xff\xe0 not really a jpeg",
            "toc.ncx": EPUB2_NCX,
            "extra/unlisted.xhtml": UNLISTED,
        }
    )


def epub3() -> bytes:
    """A Sigil-style EPUB 3 book."""
    return build_epub(
        {
            "META-INF/container.xml": CONTAINER_XML.format(opf="OEBPS/content.opf"),
            "OEBPS/content.opf": EPUB3_OPF,
            "OEBPS/toc.ncx": EPUB3_NCX,
            "OEBPS/Text/nav.xhtml": EPUB3_NAV,
            "OEBPS/Text/chapter1.xhtml": EPUB3_CHAPTER,
            "OEBPS/Styles/style.css": "em { font-style: italic }\n",
            "OEBPS/Fonts/font.ttf": bytes(range(256)),
        }
    )


def _infos(data: bytes) -> list[tuple[str, int]]:
    return [(info.filename, info.compress_type) for info in zipfile.ZipFile(io.BytesIO(data)).infolist()]


def _members(data: bytes) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {name: archive.read(name) for name in archive.namelist()}


def _round_trips(book: bytes) -> tuple[list[str], bytes, bytes]:
    """The segments' texts, the book assembled untranslated and assembled in capitals (target ``fr``)."""
    source = encode_document("epub", book)
    skeleton = split_document(source, "epub", 200)
    stored = Skeleton.from_json(json.loads(json.dumps(skeleton.to_json())))  # as the orchestrator keeps it
    identity = base64.b64decode(finish_document("epub", stored.source()))
    translated = stored.assemble([shout(s.text) for s in stored.segments], "fr")
    return [s.text for s in stored.segments], identity, base64.b64decode(finish_document("epub", translated))


@pytest.mark.parametrize("book", [epub2, epub3], ids=["epub2", "epub3"])
def test_the_identity_round_trip_gives_every_member_back_byte_for_byte_in_order(book: object) -> None:
    assert callable(book)
    original = book()
    _, identity, translated = _round_trips(original)
    assert _members(identity) == _members(original)
    for data in (identity, translated):  # the same members in the same order, each compressed as it was
        assert _infos(data) == _infos(original)
        assert _infos(data)[0] == ("mimetype", zipfile.ZIP_STORED)
        assert data[30:38] == b"mimetype" and data[38:58] == b"application/epub+zip"  # readable at a fixed offset


def test_epub2_translates_the_manifests_chapters_ncx_labels_and_title() -> None:
    texts, _, translated_book = _round_trips(epub2())
    assert texts == [
        "The Quiet Harbour",  # dc:title; the escaped-HTML description is kept
        "Chapter One",  # <title>
        "Chapter One",  # the <h1>, its empty anchor left out before the text
        "The boat was late.\xa0Nobody on the pier said a word.",
        "She read the sign: \u201cClosed\u201d & <x1>gone</x1>.<x2/>Then she left.",
        "Two",
        "The second chapter begins here.",
        "The Quiet Harbour",  # the NCX's docTitle
        "Chapter One",
        "Chapter Two",
    ]
    original, translated = _members(epub2()), _members(translated_book)
    for name in ("mimetype", "META-INF/container.xml", "stylesheet.css", "images/cover.jpg", "extra/unlisted.xhtml"):
        assert translated[name] == original[name], name  # not in the manifest as XHTML: kept
    opf = EPUB2_OPF.replace("<dc:title>The Quiet Harbour", "<dc:title>THE QUIET HARBOUR")
    assert translated["content.opf"].decode() == opf.replace("<dc:language>en<", "<dc:language>fr<")
    chapter = translated["index_split_000.html"].decode()
    assert xml_problem(translated["index_split_000.html"]) is None
    assert '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="fr">' in chapter
    assert '<h1 class="chapter"><a id="ch1"/>CHAPTER ONE</h1>' in chapter
    assert "SHE READ THE SIGN: \u201cCLOSED\u201d &amp; <i>GONE</i>.<br/>THEN SHE LEFT." in chapter
    assert b"THE SECOND CHAPTER BEGINS HERE." in translated["Text/Chapter 2.xhtml"]  # href Text/Chapter%202.xhtml
    ncx = translated["toc.ncx"].decode()
    assert 'version="2005-1" xml:lang="fr">' in ncx and "<text>Jane Doe</text>" in ncx  # the author kept
    assert "<text>THE QUIET HARBOUR</text>" in ncx and "<text>CHAPTER TWO</text>" in ncx
    assert (
        ncx.replace("THE QUIET HARBOUR", "The Quiet Harbour")
        .replace("CHAPTER ", "Chapter ")
        .replace("ONE", "One")
        .replace("TWO", "Two")
        .replace('xml:lang="fr"', 'xml:lang="en"')
        == EPUB2_NCX
    )


def test_epub3_translates_the_nav_and_chapters_and_every_xhtml_member_stays_xml() -> None:
    texts, _, translated_book = _round_trips(epub3())
    assert "Start with <x1>good soil <x2/> and water</x1> every day.<x3><x4>1</x4></x3>" in texts
    assert "Roses and Thorns" in texts and "A red rose" in texts and "Or every other day." in texts
    original, translated = _members(epub3()), _members(translated_book)
    for name in ("OEBPS/Text/nav.xhtml", "OEBPS/Text/chapter1.xhtml"):
        assert xml_problem(translated[name]) is None, name
        assert b'lang="fr" xml:lang="fr"' in translated[name]
    assert b'<a href="chapter1.xhtml">ROSES AND THORNS</a>' in translated["OEBPS/Text/nav.xhtml"]
    chapter = translated["OEBPS/Text/chapter1.xhtml"].decode()
    assert (
        "<![CDATA[ p > em { color: red; } ]]>" in chapter
        and '<img src="../Images/rose.jpg" alt="A RED ROSE"/>' in chapter
    )
    assert "USE <code>shears</code>." in chapter
    opf = translated["OEBPS/content.opf"].decode()
    expected = EPUB3_OPF.replace(
        'xmlns="http://www.idpf.org/2007/opf" xml:lang="en">', 'xmlns="http://www.idpf.org/2007/opf" xml:lang="fr">'
    )
    expected = expected.replace("en-GB", "fr").replace("Notes from the Garden", "NOTES FROM THE GARDEN")
    assert opf == expected.replace("Short essays about plants.", "SHORT ESSAYS ABOUT PLANTS.")
    assert b"<text>ROSES AND THORNS</text>" in translated["OEBPS/toc.ncx"]
    for name in ("mimetype", "META-INF/container.xml", "OEBPS/Styles/style.css", "OEBPS/Fonts/font.ttf"):
        assert translated[name] == original[name], name


def test_a_translation_that_moves_a_self_closing_anchor_keeps_the_xhtml_well_formed() -> None:
    # An empty XHTML element (<a id="p1"/>) is a unit tag: paired with the next </a> it could move out of order.
    skeleton = Skeleton()
    split_html('<p>Start <a href="#">link <a id="x"/> inner</a> end.</p>', 200, skeleton)
    assert [s.text for s in skeleton.segments] == ["Start <x1>link <x2/> inner</x1> end."]
    reordered = skeleton.assemble(["End <x1>inner <x2/> link</x1> start."])
    assert reordered == '<p>End <a href="#">inner <a id="x"/> link</a> start.</p>'
    assert xml_problem(reordered.encode()) is None


def test_an_empty_inline_code_element_stays_inside_its_sentence() -> None:
    skeleton = Skeleton()
    split_html("<p>Type <code/> and <kbd>Enter</kbd> now.</p>", 200, skeleton)
    assert [s.text for s in skeleton.segments] == ["Type <x1/> and <x2/> now."]


def test_prefixed_svg_and_math_are_kept_as_they_are() -> None:
    skeleton = Skeleton()
    source = '<p>Figure:</p><svg:svg xmlns:svg="http://www.w3.org/2000/svg"><svg:text>x = 1</svg:text></svg:svg>'
    split_html(source + "<m:math><m:mi>sin</m:mi></m:math>", 200, skeleton)
    assert [s.text for s in skeleton.segments] == ["Figure:"]


def test_xhtml_entities_are_well_formed_under_an_xhtml_doctype_only() -> None:
    assert xml_problem(f"{XHTML_11}<html>&nbsp;&eacute;</html>".encode()) is None
    assert xml_problem(b"<!DOCTYPE html><html>&nbsp;</html>") is not None  # no DTD declares it
    assert xml_problem(f"{XHTML_11}<html>&bogus;</html>".encode()) is not None


def _book(**changes: str | bytes | None) -> str:
    """``epub3()`` with members replaced (``None``: removed), as base64."""
    members: dict[str, str | bytes] = {
        "META-INF/container.xml": CONTAINER_XML.format(opf="OEBPS/content.opf"),
        "OEBPS/content.opf": EPUB3_OPF,
        "OEBPS/Text/chapter1.xhtml": EPUB3_CHAPTER,
    }
    for name, content in changes.items():
        key = {
            "container": "META-INF/container.xml",
            "opf": "OEBPS/content.opf",
            "chapter": "OEBPS/Text/chapter1.xhtml",
        }[name]
        if content is None:
            del members[key]
        else:
            members[key] = content
    mimetype = changes.get("mimetype")
    return encode_document(
        "epub", build_epub(members, **({"mimetype": mimetype} if isinstance(mimetype, bytes) else {}))
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("not base64 at all!", r"this is not a \.epub file \(not a zip archive"),
        (base64.b64encode(b"PK but not a zip").decode(), r"this is not a \.epub file \(not a zip archive"),
        (_book(container=None), r"this is not a \.epub file \(an EPUB e-book\): it has no META-INF/container\.xml"),
        (
            _book(container=CONTAINER_XML.format(opf="OEBPS/book.opf")),
            r"META-INF/container\.xml names the package document OEBPS/book\.opf, which the file does not hold",
        ),
        (_book(container="<container><rootfiles/></container>"), "names no package document"),
        (_book(container="<container><rootfiles>"), r"META-INF/container\.xml is not well-formed XML"),
        (_book(chapter="<html><body><p>Unclosed</body></html>"), r"OEBPS/Text/chapter1\.xhtml is not well-formed XML"),
        (_book(chapter='<!DOCTYPE html [<!ENTITY a "b">]><html>&a;</html>'), "declares entities of its own"),
        (
            encode_document(
                "epub", build_epub({"META-INF/container.xml": "<container/>"}, mimetype=b"application/zip")
            ),
            r"its mimetype is application/zip, not application/epub\+zip",
        ),
    ],
    ids=[
        "not-base64",
        "not-a-zip",
        "no-container",
        "missing-opf",
        "no-rootfile",
        "broken-container",
        "broken-chapter",
        "entities",
        "wrong-mimetype",
    ],
)
def test_a_damaged_epub_is_a_clear_error(source: str, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        split_document(source, "epub", 200)


def _encryption(uri: str) -> str:
    return (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.idpf.org/2008/embedding"/>'
        f'<enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData></encryption>'
    )


def test_an_encrypted_chapter_is_refused_and_an_obfuscated_font_is_not() -> None:
    members: dict[str, str | bytes] = {
        "META-INF/container.xml": CONTAINER_XML.format(opf="OEBPS/content.opf"),
        "OEBPS/content.opf": EPUB3_OPF,
        "OEBPS/Text/chapter1.xhtml": EPUB3_CHAPTER,
        "OEBPS/Fonts/font.ttf": b"\x00obfuscated",
    }
    drm = build_epub({**members, "META-INF/encryption.xml": _encryption("OEBPS/Text/chapter1.xhtml")})
    with pytest.raises(InvalidJobError, match=r"encrypted \(DRM\): OEBPS/Text/chapter1\.xhtml cannot be read"):
        split_document(encode_document("epub", drm), "epub", 200)
    font = build_epub({**members, "META-INF/encryption.xml": _encryption("OEBPS/Fonts/font.ttf")})
    texts, identity, _ = _round_trips(font)
    assert "Roses and Thorns" in texts and _members(identity) == _members(font)


def test_a_package_document_with_a_byte_order_mark_is_still_the_package() -> None:
    book = build_epub(
        {
            "META-INF/container.xml": CONTAINER_XML.format(opf="content.opf"),
            "content.opf": "\ufeff" + EPUB3_OPF.replace('href="Text/', 'href="OEBPS/Text/'),
            "OEBPS/Text/chapter1.xhtml": EPUB3_CHAPTER,
        }
    )
    texts, identity, translated = _round_trips(book)
    assert "en-GB" not in texts and texts[:2] == ["Notes from the Garden", "Short essays about plants."]
    assert _members(identity) == _members(book)
    assert "<dc:language>fr</dc:language>" in _members(translated)["content.opf"].decode("utf-8-sig")


def test_a_translation_that_swaps_the_edges_of_elements_crossing_sentence_ends_keeps_its_source() -> None:
    # <i> opens in the first sentence and closes in the second, <b> opens in the second: the second
    # sentence's unit tags are an end tag and a start tag, which must keep their order.
    skeleton = Skeleton()
    split_html("<p><i>One here. Two</i> three <b>four now. Five</b> end.</p>", 20, skeleton)
    texts = [s.text for s in skeleton.segments]
    assert texts == ["<x1/>One here.", "Two<x1/> three <x2/>four now.", "Five<x1/> end."]
    swapped = skeleton.assemble([shout(texts[0]), "<x2/>Four now three two<x1/>.", shout(texts[2])])
    assert swapped == "<p><i>ONE HERE. Two</i> three <b>four now. FIVE</b> END.</p>"  # the sentence as it was
    assert xml_problem(swapped.encode()) is None
    report = DocumentReport(segments=3)
    report.add(1, skeleton.segments[1], "<x2/>Four now three two<x1/>.", None)
    assert report.tags_broken == [{"segment": 1, "source": texts[1]}]  # listed as kept in the source language
    kept = skeleton.assemble([shout(t) for t in texts])
    assert kept == "<p><i>ONE HERE. TWO</i> THREE <b>FOUR NOW. FIVE</b> END.</p>"


def test_an_element_edge_moved_inside_a_paired_tag_keeps_the_source() -> None:
    skeleton = Skeleton()
    split_html("<p><i>One here. Two</i> and <em>three</em> now.</p>", 20, skeleton)
    texts = [s.text for s in skeleton.segments]
    assert texts[1] == "Two<x1/> and <x2>three</x2> now."
    moved = skeleton.assemble([texts[0], "Two and <x2>three<x1/></x2> now.", *texts[2:]])
    assert moved == "<p><i>One here. Two</i> and <em>three</em> now.</p>"
    assert skeleton.segments[1].tags_kept("Two and <x2>three</x2><x1/> now.")  # after it: fine


CROSSING_CHAPTER = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><title>X</title></head><body>
<p><i>One here. Two</i> three <b>four now. Five <em>six. Seven</em> eight.</b> Nine <a href="#">ten. <span>Eleven</span>
twelve.</a></p>
<p>Some <a id="x"/>anchor <strong>bold <code>c</code> text. More <br/> lines</strong> and <img src="a.png" alt="pic"/>
done. End <sup><a href="#n">1</a></sup>.</p>
</body></html>"""


def _shuffled(text: str, rng: random.Random) -> str:
    """``text``'s runs and tags in a random order that still keeps its tags (as a model may reorder them)."""
    parts = tokens(text)
    for _ in range(50):
        rng.shuffle(parts)
        candidate = "".join(str(part) for part in parts)
        if tag_problem(text, candidate) is None:
            return candidate
    return text


def test_every_tag_keeping_reordering_of_every_sentence_leaves_each_xhtml_member_xml() -> None:
    rng = random.Random(36)
    members: dict[str, str | bytes] = {
        "META-INF/container.xml": CONTAINER_XML.format(opf="OEBPS/content.opf"),
        "OEBPS/content.opf": EPUB3_OPF,
        "OEBPS/Text/chapter1.xhtml": CROSSING_CHAPTER,
    }
    books = [epub2(), epub3(), build_epub(members)]
    for _ in range(40):
        for book in books:
            skeleton = split_document(encode_document("epub", book), "epub", rng.choice([20, 40, 200]))
            translated = skeleton.assemble([_shuffled(s.text, rng) for s in skeleton.segments], "fr")
            finish_document("epub", translated)  # raises if a translated member is not well-formed XML

"""Zipped documents no Office application writes, and translations that move spaces between runs."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from contract.documents import check_zipped_document, encode_document
from contract.errors import InvalidJobError
from orchestrator.segmenting import split_document
from orchestrator.segmenting.split import finish_document
from tests.orchestrator.office_files import make_pptx, make_xlsx, members
from tests.orchestrator.test_document_formats import make_docx
from tests.orchestrator.test_opendocument import make_odf

CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""The first bytes of a Compound File: a password-protected Office file, or an old .doc/.xls/.ppt."""


def _replaced(data: bytes, name: str, content: bytes) -> bytes:
    """``data`` with member ``name``'s bytes replaced, every member in its place."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, old in members(data).items():
            archive.writestr(member, content if member == name else old)
    return buffer.getvalue()


def _with_member(data: bytes, name: str, content: bytes) -> bytes:
    buffer = io.BytesIO(data)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(name, content)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["word/media/a\x1db.png", "word/media/a\x1cb.png", "word/media/a\nb.png"])
def test_a_member_name_with_a_control_character_is_refused_as_damaged(name: str) -> None:
    # the container text separates members with such characters: one in a name used to crash the split
    source = encode_document("docx", _with_member(make_docx(), name, b"x"))
    with pytest.raises(InvalidJobError, match="control character"):
        split_document(source, "docx", 200)


@pytest.mark.parametrize("character", ["\x1c", "\x1d", "\x00", "\x0b"])
def test_a_text_member_with_a_control_character_xml_forbids_is_refused_as_damaged(character: str) -> None:
    # \x1c used to crash the split (ValueError); the others reached the model and failed only when zipped
    body = f"<w:p><w:r><w:t>Bad{character}char here.</w:t></w:r></w:p>"
    source = encode_document("docx", make_docx(body))
    with pytest.raises(
        InvalidJobError, match=f"word/document.xml holds the control character '\\\\x{ord(character):02x}'"
    ):
        split_document(source, "docx", 200)


LAUGHS = "".join(['<!ENTITY a0 "aaaaaaaaaa">'] + [f'<!ENTITY a{n + 1} "{f"&a{n};" * 10}">' for n in range(8)])


def test_an_office_part_declaring_entities_is_refused_before_translation() -> None:
    # used to be split and translated, then to fail as zipped ("a dragoman bug"): expat stops the expansion
    body = "<w:p><w:r><w:instrText>&a8;</w:instrText><w:t>Hello there.</w:t></w:r></w:p>"
    data = make_docx(body)
    document = members(data)["word/document.xml"].replace(
        b"<w:document", f"<!DOCTYPE w:document [{LAUGHS}]><w:document".encode(), 1
    )
    source = encode_document("docx", _replaced(data, "word/document.xml", document))
    with pytest.raises(InvalidJobError, match=r"word/document\.xml has a <!DOCTYPE>"):
        split_document(source, "docx", 200)


@pytest.mark.parametrize("fmt", ["docx", "pptx", "xlsx"])
def test_an_office_part_that_is_not_well_formed_is_refused_before_translation(fmt: str) -> None:
    # used to be split and translated, then to fail as zipped, calling itself "a dragoman bug"
    data, part = {
        "docx": (make_docx(), "word/document.xml"),
        "pptx": (make_pptx(), "ppt/slides/slide1.xml"),
        "xlsx": (make_xlsx(), "xl/sharedStrings.xml"),
    }[fmt]
    broken = members(data)[part].replace(b"</", b"<", 1)
    source = encode_document(fmt, _replaced(data, part, broken))
    with pytest.raises(InvalidJobError, match=f"this .{fmt} is damaged: {part} is not well-formed XML"):
        split_document(source, fmt, 200)


def test_a_password_protected_office_file_is_named_as_such() -> None:
    # Office encrypts a password-protected .docx into a Compound File, not a zip
    source = encode_document("docx", CFB_MAGIC + bytes(1024))
    with pytest.raises(InvalidJobError, match="password-protected"):
        check_zipped_document("docx", source)
    with pytest.raises(InvalidJobError, match="password-protected"):
        split_document(source, "docx", 200)


def _encrypted(data: bytes, name: str) -> bytes:
    """``data`` with member ``name`` flagged as encrypted (as a zip tool's password leaves it)."""
    changed = bytearray(data)
    changed[zipfile.ZipFile(io.BytesIO(data)).getinfo(name).header_offset + 6] |= 1
    entry = 0
    while (entry := changed.find(b"PK\x01\x02", entry + 1)) != -1:
        (length,) = struct.unpack("<H", changed[entry + 28 : entry + 30])
        if changed[entry + 46 : entry + 46 + length] == name.encode():
            changed[entry + 8] |= 1
    return bytes(changed)


@pytest.mark.parametrize("member", ["word/document.xml", "word/media/image1.png"])
def test_a_zip_with_an_encrypted_member_is_named_password_protected_not_damaged(member: str) -> None:
    source = encode_document("docx", _encrypted(make_docx(), member))
    with pytest.raises(InvalidJobError, match=f"password-protected zip \\({member} is encrypted\\)"):
        split_document(source, "docx", 200)


def test_a_password_protected_opendocument_file_is_named_as_such() -> None:
    # LibreOffice encrypts the members inside a plain zip: content.xml used to be "damaged: not UTF-8"
    data = make_odf("text", "<text:p>Secret plans.</text:p>")
    manifest = members(data)["META-INF/manifest.xml"].replace(
        b'manifest:media-type="text/xml"/>',
        b'manifest:media-type="text/xml" manifest:size="950"><manifest:encryption-data manifest:checksum-type='
        b'"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0#sha256-1k" manifest:checksum="AAAA">'
        b'<manifest:algorithm manifest:algorithm-name="http://www.w3.org/2001/04/xmlenc#aes256-cbc" '
        b'manifest:initialisation-vector="AAAA"/></manifest:encryption-data></manifest:file-entry>',
    )
    encrypted = _replaced(_replaced(data, "META-INF/manifest.xml", manifest), "content.xml", bytes(range(128, 256)))
    with pytest.raises(InvalidJobError, match="password-protected"):
        split_document(encode_document("odt", encrypted), "odt", 200)


def _translated_member(fmt: str, data: bytes, member: str, translate: dict[str, str]) -> str:
    skeleton = split_document(encode_document(fmt, data), fmt, 200)
    texts = [translate.get(segment.text, segment.text) for segment in skeleton.segments]
    return members(finish_document(fmt, skeleton.assemble(texts, "fr")))[member].decode()


def test_a_space_the_translation_moves_to_the_end_of_a_word_run_is_kept() -> None:
    # Word drops a w:t's leading and trailing spaces unless it says xml:space="preserve"
    body = (
        '<w:p><w:r><w:t>Hello</w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve"> world</w:t></w:r></w:p>'
    )
    document = _translated_member(
        "docx", make_docx(body), "word/document.xml", {"Hello<x1/> world": "Salut <x1/>monde"}
    )
    assert (
        '<w:t xml:space="preserve">Salut </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve">monde'
        in document
    )


def test_a_space_the_translation_moves_to_the_start_of_an_excel_run_is_kept() -> None:
    shared = "<si><r><t>Total</t></r><r><rPr><b/></rPr><t>due</t></r></si>"
    strings = _translated_member("xlsx", make_xlsx(shared), "xl/sharedStrings.xml", {"Total<x1/>due": "Total<x1/> dû"})
    assert '<t xml:space="preserve"> dû</t>' in strings


def test_an_untranslated_word_document_still_comes_back_byte_for_byte() -> None:
    source = encode_document("docx", make_docx())
    skeleton = split_document(source, "docx", 200)
    assert members(finish_document("docx", skeleton.source())) == members(source)


TEXT_BOX = (
    '<w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
    '<mc:Choice Requires="wps"><w:drawing><wps:txbx xmlns:wps="urn:wps"><w:txbxContent><w:p><w:r>'
    "<w:t>Inside the box.</w:t></w:r></w:p></w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback>"
    '<w:pict><v:textbox xmlns:v="urn:v"><w:txbxContent><w:p><w:r><w:t>Inside the box.</w:t></w:r></w:p>'
    "</w:txbxContent></v:textbox></w:pict></mc:Fallback></mc:AlternateContent></w:r>"
)


def test_the_text_of_a_word_paragraph_that_anchors_a_text_box_is_translated_around_it() -> None:
    # the paragraph holding the box was skipped whole: only the box's own paragraphs were translated
    before = '<w:r><w:t xml:space="preserve">Before the box. </w:t></w:r>'
    body = f"<w:p>{before}{TEXT_BOX}<w:r><w:t>After it.</w:t></w:r></w:p>"
    source = encode_document("docx", make_docx(body))
    skeleton = split_document(source, "docx", 200)
    assert [s.text for s in skeleton.segments][:4] == [
        "Before the box.",
        "Inside the box.",
        "Inside the box.",
        "After it.",
    ]
    document = members(finish_document("docx", skeleton.assemble([s.text.upper() for s in skeleton.segments], "fr")))
    assert b"BEFORE THE BOX. </w:t>" in document["word/document.xml"]
    assert b"<w:t>AFTER IT.</w:t></w:r></w:p>" in document["word/document.xml"]
    assert members(finish_document("docx", skeleton.source())) == members(source)

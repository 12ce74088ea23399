"""The document formats dragoman translates, and how their files are stored as text.

Producers store a document and queue the orchestrator's split task by name
(:data:`contract.orchestration.SPLIT`); the orchestrator owns the splitting itself, so a
producer never imports it.
"""

from __future__ import annotations

import base64
import binascii
import io
import zipfile

from contract.errors import InvalidJobError

FORMATS = (
    "txt",
    "md",
    "html",
    "srt",
    "vtt",
    "po",
    "json",
    "xliff",
    "docx",
    "pptx",
    "xlsx",
    "odt",
    "odp",
    "ods",
    "epub",
)
ZIPPED_FORMATS = ("docx", "pptx", "xlsx", "odt", "odp", "ods", "epub")
"""Formats whose files are zip archives of XML (Office Open XML, OpenDocument, EPUB)."""
BINARY_FORMATS = ZIPPED_FORMATS
"""Formats whose files are bytes: they travel and are stored as base64 text."""
SUFFIXES = {
    ".txt": "txt",
    ".text": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".srt": "srt",
    ".vtt": "vtt",
    ".po": "po",
    ".pot": "po",
    ".json": "json",
    ".xlf": "xliff",
    ".xliff": "xliff",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".odt": "odt",
    ".odp": "odp",
    ".ods": "ods",
    ".epub": "epub",
}
MEDIA_TYPES = {
    "txt": "text/plain",
    "md": "text/markdown",
    "html": "text/html",
    "srt": "application/x-subrip",
    "vtt": "text/vtt",
    "po": "text/x-gettext-translation",
    "json": "application/json",
    "xliff": "application/xliff+xml",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "odt": "application/vnd.oasis.opendocument.text",
    "odp": "application/vnd.oasis.opendocument.presentation",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "epub": "application/epub+zip",
}
"""The media type of each format, both ways: an upload's type names its format, a download's says it."""


def encode_document(fmt: str, data: bytes) -> str:
    """A file's bytes as the text dragoman stores: UTF-8 text, or base64 for a binary format."""
    if fmt in BINARY_FORMATS:
        return base64.b64encode(data).decode()
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise InvalidJobError(f"the document is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def decode_document(fmt: str, text: str) -> bytes:
    """The file's bytes from what dragoman stores (the inverse of :func:`encode_document`)."""
    if fmt in BINARY_FORMATS:
        try:
            return base64.b64decode(text, validate=True)
        except binascii.Error as exc:
            raise InvalidJobError(f"a stored {fmt} document is not base64 ({exc})") from None
    return text.encode()


def check_zipped_document(fmt: str, text: str) -> None:
    """Refuse a stored zipped-format document (:data:`ZIPPED_FORMATS`) whose bytes are not a zip archive.

    Checked when a document is submitted, by every door (the client, ``dragoman translate``, the native,
    DeepL and LibreTranslate uploads), so a truncated ``.pptx`` or a text file named ``.docx`` is refused at
    once rather than failing later, when the orchestrator splits it. Other formats pass unchecked.
    """
    if fmt not in ZIPPED_FORMATS:
        return
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise InvalidJobError(
            f"the .{fmt} document is not base64 text ({exc}); encode the file's bytes with "
            "contract.documents.encode_document"
        ) from None
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise not_a_zip_error(fmt, data)


COMPOUND_FILE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
"""How a Compound File starts: what Office saves a password-protected .docx/.xlsx/.pptx as (and an old .doc)."""


def not_a_zip_error(fmt: str, data: bytes) -> InvalidJobError:
    """The error for a zipped-format file whose bytes are no zip: a password-protected Office file named as such.

    Office encrypts a password-protected document into a Compound File, and a ``.doc``/``.xls``/``.ppt`` of
    Office 97-2003 is one too: neither can be read, and the user can act on that (remove the password, save again).
    """
    if data.startswith(COMPOUND_FILE_MAGIC):
        return InvalidJobError(
            f"the .{fmt} file is a password-protected (encrypted) Office file, or an Office 97-2003 file "
            f"renamed: remove its password, or save it as .{fmt}, and send it again"
        )
    return InvalidJobError(
        f"the .{fmt} file is not a zip archive, so not a real .{fmt}; send the file as its application saved it"
    )

"""Choosing the splitter for a document's format, and checking that splitting changed nothing."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from contract.documents import FORMATS
from contract.errors import DocumentTooLargeError, InvalidJobError
from orchestrator.segmenting import zip_container
from orchestrator.segmenting.docx import DOCX
from orchestrator.segmenting.epub import EPUB
from orchestrator.segmenting.gettext import split_po
from orchestrator.segmenting.html_format import split_html
from orchestrator.segmenting.json_resources import split_json
from orchestrator.segmenting.markdown_format import split_markdown
from orchestrator.segmenting.opendocument import ODP, ODS, ODT
from orchestrator.segmenting.pptx import PPTX
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.subtitles import split_srt, split_vtt
from orchestrator.segmenting.text_format import split_text
from orchestrator.segmenting.xliff import split_xliff
from orchestrator.segmenting.xlsx import XLSX
from orchestrator.segmenting.zip_container import ZipFormat

ZIPPED: dict[str, ZipFormat] = {
    DOCX.name: DOCX,
    PPTX.name: PPTX,
    XLSX.name: XLSX,
    EPUB.name: EPUB,
    ODT.name: ODT,
    ODP.name: ODP,
    ODS.name: ODS,
}
"""The zipped formats by name: each opened into a container text, its text members split by its own rules."""


BYTE_ORDER_MARK = "\ufeff"
"""What Windows editors write before a UTF-8 text file; a text format's splitter reads the text after it."""


def split_document(
    source: str,
    fmt: str,
    max_chars: int,
    *,
    max_document_chars: int | None = None,
    max_segments: int | None = None,
    retranslate: bool = False,
    max_unpacked_bytes: int = zip_container.DEFAULT_MAX_UNPACKED_BYTES,
    target_lang: str | None = None,
) -> Skeleton:
    """Cut ``source`` (a document in one of :data:`~contract.documents.FORMATS`) into literals and segments.

    Every splitter is linear in the document's length and recursion-free (OpenDocument's nested paragraphs
    are followed at most ``opendocument.MAX_NESTING`` deep), so no input can make it run for minutes or
    overflow the stack. Over ``max_document_chars`` characters or
    ``max_segments`` segments, or a zipped format past ``max_unpacked_bytes`` unpacked, raises
    :class:`DocumentTooLargeError`. ``retranslate``: a catalogue's
    entries that already have a translation (``.po``, XLIFF) are translated again. ``target_lang``: a
    catalogue already in another language with translations is refused (:func:`split_po`).
    """
    splitters: dict[str, Callable[[str, int, Skeleton], None]] = {
        "txt": split_text,
        "md": split_markdown,
        "html": split_html,
        "srt": split_srt,
        "vtt": split_vtt,
        "po": partial(split_po, retranslate=retranslate, target_lang=target_lang),
        "json": split_json,
        "xliff": partial(split_xliff, retranslate=retranslate),
    }
    for name, zip_format in ZIPPED.items():
        splitters[name] = partial(zip_container.split_container, fmt=zip_format)
    if fmt not in splitters:
        raise InvalidJobError(f"unsupported document format {fmt!r}; use one of {', '.join(FORMATS)}")
    if max_chars < 20:
        raise InvalidJobError("max segment length must be at least 20 characters")
    if max_document_chars is not None and len(source) > max_document_chars:
        raise DocumentTooLargeError(
            f"the document has {len(source):,} characters, over the limit of {max_document_chars:,} "
            "(DRAGOMAN_MAX_DOCUMENT_CHARS); split it into smaller documents"
        )
    zipped = ZIPPED.get(fmt)  # a zipped format: split its container text
    text = source if zipped is None else zip_container.unpack(source, zipped, max_unpacked_bytes, ZIPPED.values())
    skeleton = Skeleton(max_segments=max_segments)
    bom = BYTE_ORDER_MARK if zipped is None and text.startswith(BYTE_ORDER_MARK) else ""
    skeleton.literal(bom)  # kept as written, never the model's nor a parser's (json, a .po's first keyword)
    splitters[fmt](text[len(bom) :], max_chars, skeleton)
    if skeleton.source() != text:  # an invariant; a bug here must never change a user's document
        raise InvalidJobError(f"this {fmt} document could not be split without changing it (a dragoman bug)")
    return skeleton


def finish_document(fmt: str, assembled: str) -> str:
    """The stored form of an assembled document: a zipped format's container zipped again, else itself.

    An output that is not valid in its own format raises :class:`InvalidJobError` with the reason
    (the document fails with it, never finishes as a broken file): a gettext catalogue must parse
    as one, an XLIFF file and a zipped format's XML members must be well-formed.
    """
    if fmt in ZIPPED:
        return zip_container.pack(assembled, ZIPPED[fmt])  # checks its XML members itself
    check_output(fmt, assembled)
    return assembled


def check_output(fmt: str, assembled: str) -> None:
    """Raise :class:`InvalidJobError` when an assembled ``.po`` or XLIFF document is invalid in its format."""
    text = assembled.removeprefix(BYTE_ORDER_MARK)
    if fmt == "po":
        try:  # the splitter is the catalogue's parser: every line a comment, a keyword and its string, or blank
            split_po(text, 10_000, Skeleton(), retranslate=True)
        except InvalidJobError as exc:
            raise InvalidJobError(f"the translated catalogue does not parse: {exc}") from None
    elif fmt == "xliff":
        problem = zip_container.xml_problem(text.encode())
        if problem is not None:
            raise InvalidJobError(f"the translated XLIFF file is not well-formed XML: {problem}")

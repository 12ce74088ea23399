"""E-books (``.epub``): the book's XHTML through the HTML splitter, its package files kept.

An EPUB is a zip (``orchestrator.segmenting.zip_container`` opens and closes it) whose
``META-INF/container.xml`` names the package document (the OPF). What is translated is read
from that package, not guessed from names: every manifest item of type
``application/xhtml+xml`` (the chapters and EPUB 3's ``nav.xhtml``) goes through the HTML
splitter, its ``lang``/``xml:lang`` set to the target language; in EPUB 2's ``toc.ncx`` the
book title and each ``navLabel``'s text are translated; in the OPF the ``dc:title`` and a
plain-text ``dc:description``, with the first ``dc:language`` set to the target language.
Everything else (the manifest and spine, CSS, images, fonts, ``mimetype`` first and
uncompressed) comes back byte for byte.
"""

from __future__ import annotations

import posixpath
import re
import xml.etree.ElementTree as ElementTree
from urllib.parse import unquote

from contract.errors import InvalidJobError
from orchestrator.segmenting.html_format import split_html
from orchestrator.segmenting.parts import LangAttribute
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import NO_NAMES, MemberReader, ZipFormat, xml_problem

CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
_PACKAGE_TYPE = "application/oebps-package+xml"
_XHTML_TYPE = "application/xhtml+xml"
_NCX_TYPE = "application/x-dtbncx+xml"
_LABEL = "this is not a .epub file"

_PROLOG = re.compile(r"\ufeff|<\?.*?\?>|<!--.*?-->|<!DOCTYPE(?:[^\[>]|\[.*?\])*>|\s+", re.DOTALL | re.IGNORECASE)
_ROOT_NAME = re.compile(r"<([^\s/>]+)")
_XML_LANG = re.compile(r"""(\sxml:lang\s*=\s*)(["'])(.*?)\2""")
_START_TAG = re.compile(r"<[^\s/>!?][^>]*>")
# The OPF's title and description; a description written as escaped HTML (&lt;p&gt;) stays as it is.
_DC_TEXT = re.compile(r"(<dc:(title|description)\b[^>]*>)([^<]*)(</dc:\2\s*>)")
_DC_LANGUAGE = re.compile(r"(<dc:language\b[^>]*>)(\s*)([^<\s]+)(\s*</dc:language\s*>)")
# toc.ncx: the book's title and each entry's label (an author's name in docAuthor is kept).
_NCX_LABEL = re.compile(r"(<(?:navLabel|docTitle)\b[^>]*>\s*<text(?:\s[^>]*)?>)([^<]*)(</text\s*>)")


def text_members(names: list[str], read: MemberReader) -> set[str]:
    """The members the package translates: the OPF, its XHTML content documents and its NCX.

    Each must be well-formed XML, or the book is refused naming the member: a translated member
    is checked again when the book is zipped, and a chapter that was broken before is no bug of ours.
    """
    package = _package_path(read)
    if package not in names:
        raise InvalidJobError(
            f"this .epub is damaged: {CONTAINER} names the package document {package}, which the file does not hold"
        )
    opf = _parse(package, read(package) or b"")
    chosen = {package}
    for item in opf.iter():
        if _local(item.tag) != "item":
            continue
        media_type = (item.get("media-type") or "").strip().lower()
        href = item.get("href")
        if href is None or media_type not in (_XHTML_TYPE, _NCX_TYPE):
            continue
        name = posixpath.normpath(posixpath.join(posixpath.dirname(package), unquote(href.split("#")[0])))
        if name in names:  # a manifest item the zip lacks: nothing to translate there
            chosen.add(name)
    _refuse_encrypted(chosen, read)
    for name in sorted(chosen - {package}):
        _check(name, read(name) or b"")
    return chosen


def _refuse_encrypted(chosen: set[str], read: MemberReader) -> None:
    """A clear error if ``META-INF/encryption.xml`` says a member to translate is encrypted (DRM).

    An obfuscated font is listed there too and is no obstacle: fonts are kept as they are.
    """
    content = read(ENCRYPTION)
    if content is None:
        return
    for reference in _parse(ENCRYPTION, content).iter():
        uri = reference.get("URI") if _local(reference.tag) == "CipherReference" else None
        if uri is not None and posixpath.normpath(unquote(uri)) in chosen:
            raise InvalidJobError(
                f"this .epub is encrypted (DRM): {posixpath.normpath(unquote(uri))} cannot be read; "
                "send a book without DRM"
            )


def _package_path(read: MemberReader) -> str:
    """The OPF's path, from ``META-INF/container.xml``'s first package ``rootfile``."""
    container = _parse(CONTAINER, read(CONTAINER) or b"")
    for rootfile in container.iter():
        if _local(rootfile.tag) != "rootfile":
            continue
        path = (rootfile.get("full-path") or "").strip()
        if path and (rootfile.get("media-type") or _PACKAGE_TYPE).strip() == _PACKAGE_TYPE:
            return path
    raise InvalidJobError(f"{_LABEL} (an EPUB e-book): its {CONTAINER} names no package document (rootfile)")


def _parse(name: str, content: bytes) -> ElementTree.Element:
    """Package file ``name`` (the container, the OPF) as an element tree; a clear error if it is not XML."""
    _refuse_entities(name, content)
    try:
        return ElementTree.fromstring(content)
    except ElementTree.ParseError as exc:
        raise InvalidJobError(f"this .epub is damaged: {name} is not well-formed XML ({exc})") from None


def _check(name: str, content: bytes) -> None:
    """A clear error if content document ``name`` is not well-formed XML (XHTML's entities allowed)."""
    _refuse_entities(name, content)
    problem = xml_problem(content)
    if problem is not None:
        raise InvalidJobError(f"this .epub is damaged: {name} is not well-formed XML ({problem})")


def _refuse_entities(name: str, content: bytes) -> None:
    """Entities a member declares itself are never expanded (a few bytes can declare gigabytes)."""
    if b"<!ENTITY" in content:
        raise InvalidJobError(
            f"this .epub declares entities of its own in {name} (<!ENTITY>); an EPUB needs none: remove them"
        )


def _local(tag: str) -> str:
    """An element's name without its namespace."""
    return tag.rpartition("}")[2]


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """One translated member, split by what its root element says it is: package, NCX or XHTML."""
    root = _ROOT_NAME.match(xml, _after_prolog(xml))
    kind = root.group(1).rpartition(":")[2] if root else ""
    if kind == "package":
        _split_package(xml, max_chars, skeleton)
    elif kind == "ncx":
        _split_ncx(xml, max_chars, skeleton)
    else:
        split_html(xml, max_chars, skeleton)


def _after_prolog(xml: str) -> int:
    """Where the root element starts: past the XML declaration, comments, the DOCTYPE and whitespace."""
    position = 0
    while (match := _PROLOG.match(xml, position)) is not None and match.end() > position:
        position = match.end()
    return position


def _split_package(xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """The OPF: ``dc:title`` and a plain ``dc:description`` translated, the first ``dc:language`` the target's."""
    language = _DC_LANGUAGE.search(xml)
    position = 0
    for match in sorted([*_DC_TEXT.finditer(xml), *([language] if language else [])], key=lambda m: m.start()):
        _root_tag_literal(xml[position : match.start()], skeleton, root=position == 0)
        if match is language:
            skeleton.literal(match.group(1) + match.group(2))
            skeleton.add_lang(LangAttribute(match.group(3)))
            skeleton.literal(match.group(4))
        else:
            _lang_tag(match.group(1), skeleton)
            if "&lt;" in match.group(3):  # escaped HTML (as Calibre writes descriptions): kept as it is
                skeleton.literal(match.group(3))
            else:
                skeleton.prose(match.group(3), max_chars, escape="html")
            skeleton.literal(match.group(4))
        position = match.end()
    _root_tag_literal(xml[position:], skeleton, root=position == 0)


def _split_ncx(xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """``toc.ncx``: the book title and the entries' labels translated, the root's ``xml:lang`` the target's."""
    position = 0
    for match in _NCX_LABEL.finditer(xml):
        _root_tag_literal(xml[position : match.start()], skeleton, root=position == 0)
        skeleton.literal(match.group(1))
        skeleton.prose(match.group(2), max_chars, escape="html")
        skeleton.literal(match.group(3))
        position = match.end()
    _root_tag_literal(xml[position:], skeleton, root=position == 0)


def _root_tag_literal(text: str, skeleton: Skeleton, *, root: bool) -> None:
    """``text`` as it is, but for the root element's ``xml:lang`` (when ``text`` opens the document)."""
    if not root:
        skeleton.literal(text)
        return
    start = _after_prolog(text)
    tag = _START_TAG.match(text, start)
    if tag is None:
        skeleton.literal(text)
        return
    skeleton.literal(text[:start])
    _lang_tag(tag.group(0), skeleton)
    skeleton.literal(text[tag.end() :])


def _lang_tag(tag: str, skeleton: Skeleton) -> None:
    """A start tag as it is, its ``xml:lang`` value set to the target language."""
    match = _XML_LANG.search(tag)
    if match is None or not match.group(3).strip():
        skeleton.literal(tag)
        return
    skeleton.literal(tag[: match.start(3)])
    skeleton.add_lang(LangAttribute(match.group(3)))
    skeleton.literal(tag[match.end(3) :])


EPUB = ZipFormat(
    name="epub",
    kind="an EPUB e-book",
    required=CONTAINER,
    text_parts=NO_NAMES,
    split_part=split_part,
    mimetype="application/epub+zip",
    text_members=text_members,
)
"""E-books: the XHTML content documents, the NCX's labels and the OPF's title and language translated."""

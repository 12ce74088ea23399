"""Zipped documents (Office Open XML, OpenDocument, EPUB) as one *container* text the splitters read.

A zipped document travels as base64 text (``contract.documents``). :func:`unpack` opens the zip
into a container text: every member in order, behind a header naming it, how it is stored in the
zip and whether it is text (XML to translate) or kept bytes (base64). The format's
:class:`ZipFormat` says which members are translated (by name, or as the file's own package lists
them: an EPUB's manifest) and splits each; every other member comes
back byte for byte. :func:`pack` zips an assembled container again, each member stored as it was
(an OpenDocument or EPUB ``mimetype`` must stay first and uncompressed), each translated member
checked to be well-formed XML.
"""

from __future__ import annotations

import base64
import binascii
import html.entities
import io
import re
import xml.etree.ElementTree as ElementTree
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass

from contract.documents import COMPOUND_FILE_MAGIC, not_a_zip_error
from contract.errors import DocumentTooLargeError, InvalidJobError
from orchestrator.segmenting.skeleton import Skeleton

_MEMBER = "\x1d"  # separators no XML 1.0 text can hold
_END = "\x1c"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_IN_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_ENCRYPTED = 0x1  # a zip member's general purpose flag: encrypted with a password
_STORED = ":stored"  # a kind's suffix for a member the zip holds uncompressed
DEFAULT_MAX_UNPACKED_BYTES = 64 * 1024 * 1024
"""``DRAGOMAN_MAX_DOCUMENT_UNPACKED_BYTES``' default: what a zipped document may unpack to, all members together."""
READ_CHUNK = 1024 * 1024

PartSplitter = Callable[[str, str, int, Skeleton], None]
"""Splits one translated member: ``(member name, its XML text, max segment chars, skeleton)``."""
MemberReader = Callable[[str], bytes | None]
"""A member's bytes by name (``None``: the zip has no such member)."""
TextMembers = Callable[[list[str], MemberReader], Collection[str]]
"""Chooses the translated members from the file's own package: ``(member names, reader) -> names``."""
NO_NAMES = re.compile(r"(?!)")
"""A :attr:`ZipFormat.text_parts` that matches no name: for a format whose :attr:`~ZipFormat.text_members` choose."""
_XHTML_ENTITIES = {name: chr(code) for name, code in html.entities.name2codepoint.items()}


@dataclass(frozen=True, slots=True)
class ZipFormat:
    """What one zipped format is: how to recognise it, which members hold its text, how to split them."""

    name: str
    """The format's name in :data:`contract.documents.FORMATS` (``"docx"``)."""
    kind: str
    """What a user calls such a file, for errors (``"a Word document"``)."""
    required: str
    """A member every such file has (``word/document.xml``): without it the zip is not one."""
    text_parts: re.Pattern[str]
    """Member names (matched in full) whose XML is translated."""
    split_part: PartSplitter
    """Splits one of those members into literals and segments."""
    mimetype: str | None = None
    """The content a ``mimetype`` member must have (OpenDocument, EPUB), if the format has one."""
    text_members: TextMembers | None = None
    """Chooses more translated members from what the file says of itself (an EPUB's manifest)."""
    plan: Callable[[Members], PartSplitter] | None = None
    """For a format whose members depend on each other (an Excel table's header cells must keep the
    names its table gives them): the splitter for this document, made from all its members."""
    checks_xml: bool = False
    """Whether :func:`unpack` refuses a translated member that is not well-formed XML or declares a DTD (Office
    Open XML: its packages forbid a DTD, and Office refuses either), before anything is translated rather than
    when the translation is zipped. OpenDocument and EPUB check their members themselves."""
    finish_part: Callable[[str, str], str] | None = None
    """Rewrites a translated member ``(name, its XML)`` before it is zipped (Word's spaces kept at a run's edge)."""

    def is_text_part(self, name: str) -> bool:
        """Whether member ``name`` is translated by its name alone."""
        return self.text_parts.fullmatch(name) is not None


def unpack(
    source: str,
    fmt: ZipFormat,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES,
    known: Iterable[ZipFormat] = (),
) -> str:
    """The container text of a base64 zipped document (a clear error for anything that is not one).

    ``known``: every zipped format dragoman reads (``split.ZIPPED``, passed in: split imports this module).
    A file of another of them (an ``.ods`` sent as ``.odt``) is refused naming the format it is.

    A zip of a few KiB can unpack to gigabytes (a zip bomb): the members' declared sizes together
    must stay within ``max_unpacked_bytes`` before any is read, and each member is then read in
    chunks that stop at the bytes left, since a member's header can lie about its size. Past the
    cap raises :class:`DocumentTooLargeError` naming the member.
    """
    label = f".{fmt.name}"
    data = b""
    try:
        data = base64.b64decode(source, validate=True)
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (binascii.Error, ValueError, zipfile.BadZipFile) as exc:
        if data.startswith(COMPOUND_FILE_MAGIC):
            raise not_a_zip_error(fmt.name, data) from None
        raise InvalidJobError(f"this is not a {label} file (not a zip archive: {exc})") from None
    names = [member.filename for member in members]
    for name in names:  # the container text separates members with control characters: a name may hold none
        if _CONTROL.search(name):
            raise InvalidJobError(
                f"this {label} is damaged: a member's name, {name!a}, holds a control character, "
                "which no application writes"
            )
    declared = 0
    for member in members:
        declared += member.file_size
        if declared > max_unpacked_bytes:
            raise _too_large(label, member.filename, max_unpacked_bytes)
    by_name = {member.filename: member for member in members}

    def read(name: str) -> bytes | None:
        member = by_name.get(name)
        return None if member is None else _read_member(archive, member, max_unpacked_bytes, max_unpacked_bytes, label)

    mimetype = read("mimetype")
    if fmt.required not in names or (mimetype is not None and not _has_mimetype(fmt, mimetype)):
        raise _wrong_format(fmt, names, mimetype, known)
    chosen = fmt.text_members(names, read) if fmt.text_members is not None else ()
    left = max_unpacked_bytes
    parts: list[str] = []
    for member in members:
        name = member.filename
        content = _read_member(archive, member, left, max_unpacked_bytes, label)
        left -= len(content)
        stored = _STORED if member.compress_type == zipfile.ZIP_STORED else ""
        if name in chosen or fmt.is_text_part(name):
            try:
                text = content.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidJobError(f"this {label} is damaged: {name} is not UTF-8") from None
            if forbidden := _NOT_IN_XML.search(text):  # (the container text's separators among them)
                raise InvalidJobError(
                    f"this {label} is damaged: {name} holds the control character {forbidden.group(0)!a}, "
                    "which XML forbids"
                )
            if fmt.checks_xml:
                _check_xml(fmt, name, text)
            parts.append(f"{_MEMBER}{name}{_MEMBER}xml{stored}{_MEMBER}{text}{_END}")
        else:
            parts.append(f"{_MEMBER}{name}{_MEMBER}bin{stored}{_MEMBER}{base64.b64encode(content).decode()}{_END}")
    return "".join(parts)


def _check_xml(fmt: ZipFormat, name: str, text: str) -> None:
    """Refuse member ``name`` of a ``fmt`` file if it declares a DTD (checked first: its entities are never
    expanded) or is not well-formed XML."""
    if "<!DOCTYPE" in text:
        raise InvalidJobError(
            f"this .{fmt.name} is damaged: {name} has a <!DOCTYPE>, which {fmt.kind} never has "
            "(Office refuses to open such a file)"
        )
    problem = xml_problem(text.encode())
    if problem is not None:
        raise InvalidJobError(f"this .{fmt.name} is damaged: {name} is not well-formed XML ({problem})")


def _has_mimetype(fmt: ZipFormat, mimetype: bytes | None) -> bool:
    """Whether a zip's ``mimetype`` member (``None``: it has none) is what ``fmt`` needs, if it needs one.

    A file's own format forgives a missing ``mimetype`` (some writers leave it out); naming another format needs it.
    """
    return fmt.mimetype is None or (mimetype is not None and mimetype.strip() == fmt.mimetype.encode())


def _wrong_format(
    fmt: ZipFormat, names: list[str], mimetype: bytes | None, known: Iterable[ZipFormat]
) -> InvalidJobError:
    """The error for a zip that is not a ``fmt`` file: the format it is, if dragoman reads that one, else what is
    missing (its required member, or its ``mimetype`` shown as text)."""
    for other in known:
        if other.name != fmt.name and other.required in names and _has_mimetype(other, mimetype):
            return InvalidJobError(
                f"this file is {other.kind} (.{other.name}), not a .{fmt.name}: send it as .{other.name}"
            )
    if fmt.required not in names:
        return InvalidJobError(f"this is not a .{fmt.name} file ({fmt.kind}): it has no {fmt.required}")
    shown = "absent" if mimetype is None else mimetype.strip()[:80].decode("utf-8", "replace")
    if not shown.isprintable():
        shown = ascii(shown)
    return InvalidJobError(
        f"this is not a .{fmt.name} file ({fmt.kind}): its mimetype is {shown or 'empty'}, not {fmt.mimetype}"
    )


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, left: int, cap: int, label: str) -> bytes:
    """A member's bytes, read a chunk at a time, refused as soon as they pass the ``left`` bytes of the cap."""
    if member.flag_bits & _ENCRYPTED:
        raise InvalidJobError(
            f"this {label} is a password-protected zip ({member.filename} is encrypted): "
            "save it again without a password and send it again"
        )
    chunks: list[bytes] = []
    size = 0
    try:
        with archive.open(member) as stream:
            while chunk := stream.read(min(READ_CHUNK, left - size + 1)):
                size += len(chunk)
                if size > left:
                    raise _too_large(label, member.filename, cap)
                chunks.append(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError, zlib.error) as exc:
        raise InvalidJobError(f"this {label} is damaged: {member.filename} cannot be unpacked ({exc})") from None
    return b"".join(chunks)


def _too_large(label: str, name: str, cap: int) -> DocumentTooLargeError:
    return DocumentTooLargeError(
        f"this {label} unpacks to more than {cap:,} bytes (DRAGOMAN_MAX_DOCUMENT_UNPACKED_BYTES), "
        f"past it at member {name}; a zip that expands this far is refused"
    )


def pack(container: str, fmt: ZipFormat | None = None) -> str:
    """The base64 zip of an assembled container; its translated members must parse as XML.

    ``fmt``: the document's format, whose :attr:`~ZipFormat.finish_part` (if any) rewrites each translated member.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member in container.split(_END):
            if not member:
                continue
            _, name, kind, content = member.split(_MEMBER, 3)
            compression = zipfile.ZIP_STORED if kind.endswith(_STORED) else zipfile.ZIP_DEFLATED
            if kind.removesuffix(_STORED) == "xml":
                if fmt is not None and fmt.finish_part is not None:
                    content = fmt.finish_part(name, content)
                problem = xml_problem(content.encode())
                if problem is not None:
                    raise InvalidJobError(f"the translated {name} is not well-formed XML ({problem}); a dragoman bug")
                archive.writestr(name, content.encode(), compress_type=compression)
            else:
                archive.writestr(name, base64.b64decode(content), compress_type=compression)
    return base64.b64encode(buffer.getvalue()).decode()


def xml_problem(content: bytes) -> str | None:
    """Why ``content`` is not well-formed XML (``None``: it is).

    A document whose DOCTYPE names an external DTD may use the entities that DTD declares
    (XHTML's ``&nbsp;``, ``&eacute;``: an EPUB 2 book's chapters do); those of HTML are known
    here, since the DTD itself is never fetched. Without such a DOCTYPE an undeclared entity is an error.
    """
    parser = ElementTree.XMLParser()
    parser.entity.update(_XHTML_ENTITIES)
    try:
        parser.feed(content)
        parser.close()
    except ElementTree.ParseError as exc:
        return str(exc)
    return None


class Members:
    """A container text's members by name, each decoded only when asked for."""

    def __init__(self, container: str) -> None:
        self._members = {name: (kind, content) for name, kind, content in _members(container)}

    def names(self) -> list[str]:
        """The members' names, in the zip's order."""
        return list(self._members)

    def text(self, name: str) -> str | None:
        """Member ``name`` as UTF-8 text (``None``: no such member, or not UTF-8)."""
        if name not in self._members:
            return None
        kind, content = self._members[name]
        if kind.removesuffix(_STORED) == "xml":
            return content
        try:
            return base64.b64decode(content).decode("utf-8")
        except UnicodeDecodeError:
            return None


def _members(container: str) -> Iterator[tuple[str, str, str]]:
    """``(name, kind, content)`` of each member of a container text."""
    for member in container.split(_END):
        if member:
            _, name, kind, content = member.split(_MEMBER, 3)
            yield name, kind, content


def split_container(source: str, max_chars: int, skeleton: Skeleton, fmt: ZipFormat) -> None:
    """Split a container text: member headers and kept members literal, text members by the format's splitter."""
    split_part = fmt.split_part if fmt.plan is None else fmt.plan(Members(source))
    for name, kind, content in _members(source):
        skeleton.literal(f"{_MEMBER}{name}{_MEMBER}{kind}{_MEMBER}")
        if kind.removesuffix(_STORED) == "xml":
            split_part(name, content, max_chars, skeleton)
        else:
            skeleton.literal(content)
        skeleton.literal(_END)

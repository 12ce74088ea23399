"""OpenDocument (``.odt``, ``.odp``, ``.ods``): every paragraph's text as whole sentences, inline markup as tags.

The three formats share ODF's text model, so one splitter serves them. A document is a zip
(``orchestrator.segmenting.zip_container`` opens and closes it, the ``mimetype`` member first and
stored as it came); ``content.xml`` (the body: text, slides and their speaker notes, sheets) and
``styles.xml`` (headers, footers, master pages) are translated, and ``meta.xml``'s title, subject
and description; every other member comes back byte for byte. An image's or a shape's
alternative text (``svg:title``) and description (``svg:desc``) are translated too.

A paragraph (``text:p``, ``text:h``) is one block of prose. Formatting (``text:span``) and links
(``text:a``) inside it are paired tags; spaces (``text:s``), tabs, line breaks, bookmarks,
reference marks and fields (a page number, a date) are unit tags the model never reads; a soft
page break (where the application last broke the page, recomputed on opening) is dropped from a
translation. An element inside a paragraph that holds paragraphs itself (a footnote's body, a
text box anchored in the line, a comment) is one unit tag in its paragraph's sentence, and its
own paragraphs are segments of their own, rendered inside that tag.

Not translated: the rendering of a number, date, percentage or currency cell and any cell with a
formula (its ``text:p`` shows ``office:value``), sheet and other names (attributes are never
touched), and a presentation's empty layout placeholders (their prompt text).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from contract.errors import InvalidJobError
from orchestrator.segmenting.parts import ATTACHED_MARK, Code, Segment, attached_place
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import MemberReader, ZipFormat

_MARKUP = re.compile(
    r"<!--.*?-->"
    r"|<!\[CDATA\[.*?\]\]>"
    r"|<\?.*?\?>"
    r"|<(/?)([\w.:-]+)((?:\s+[\w.:-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*(/?)>",
    re.DOTALL,
)
_ATTRIBUTE = re.compile(r"([\w.:-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")
_PARAGRAPHS = frozenset({"text:p", "text:h"})
_ALT_TEXTS = frozenset({"svg:title", "svg:desc"})
"""An image's or a shape's alternative text and description: plain text, translated."""
_TEXTS = _PARAGRAPHS | _ALT_TEXTS
_PAIRED = frozenset({"text:span", "text:a", "text:meta"})
"""Inline elements whose content is the paragraph's own text: a paired tag around it."""
_BREAKS = frozenset({"text:line-break"})
_DROPPED = frozenset({"text:soft-page-break"})
_CELLS = frozenset({"table:table-cell", "table:covered-table-cell"})
_META_TEXT = re.compile(r"(<dc:(title|subject|description)(?:\s[^>]*)?>)([^<]*)(</dc:\2>)")
MAX_NESTING = 8
"""How deep paragraphs inside paragraphs (a text box in a footnote in a text box) are followed; deeper ones are kept."""


@dataclass(slots=True)
class _Element:
    """One element of a part, as the splitter needs it."""

    name: str
    start: int  # where its opening tag starts
    open_end: int  # where its opening tag ends
    end: int  # where its closing tag ends (its opening tag's end for an empty element)
    holds_text: bool = False  # it is a paragraph or an alternative text, or holds one
    kept: bool = False  # a paragraph whose text is not translated (a number cell's, a placeholder's)


class _Part:
    """A translated member: its markup found once, then its paragraphs cut into the skeleton."""

    def __init__(self, xml: str, skeleton: Skeleton, max_chars: int) -> None:
        self.xml = xml
        self.skeleton = skeleton
        self.max_chars = max_chars
        self.tokens = list(_MARKUP.finditer(xml))
        self.elements: dict[int, _Element] = {}  # by the index of the opening tag's token
        self.closing: dict[int, int] = {}  # opening token index -> closing token index
        self.detach = ATTACHED_MARK not in xml  # detached segments need a mark the part itself does not hold
        self._index_elements()

    def _index_elements(self) -> None:
        """Pair every opening tag with its closing tag, and mark paragraphs and the paragraphs kept."""
        stack: list[tuple[int, bool]] = []  # (token index, inside a layout placeholder)
        for index, token in enumerate(self.tokens):
            name = token.group(2)
            if name is None:  # a comment, CDATA, a processing instruction
                continue
            if token.group(1):  # closing
                if not stack or self.elements[stack[-1][0]].name != name:
                    raise InvalidJobError(f"</{name}> closes no open element; the file is damaged")
                opening, _ = stack.pop()
                element = self.elements[opening]
                element.end = token.end()
                self.closing[opening] = index
                if element.holds_text and stack:
                    self.elements[stack[-1][0]].holds_text = True
                continue
            attributes = _attributes(token.group(3))
            element = _Element(name, token.start(), token.end(), token.end())
            self.elements[index] = element
            in_placeholder = bool(stack and stack[-1][1]) or attributes.get("presentation:placeholder") == "true"
            if name in _TEXTS:
                parent = self.elements[stack[-1][0]] if stack else None
                element.kept = in_placeholder or (parent is not None and parent.kept and name in _PARAGRAPHS)
                element.holds_text = True
            elif name in _CELLS:
                value_type = attributes.get("office:value-type", "string")
                element.kept = value_type != "string" or "table:formula" in attributes
            if token.group(4):  # empty
                if element.holds_text and stack:
                    self.elements[stack[-1][0]].holds_text = True
                continue
            stack.append((index, in_placeholder))
        if stack:
            raise InvalidJobError(f"<{self.elements[stack[-1][0]].name}> is never closed; the file is damaged")

    def split(self) -> None:
        """Every paragraph and alternative text outside a paragraph translated; all between them literal."""
        self._walk(0, len(self.tokens), 0, len(self.xml), self.skeleton, depth=0)

    def _walk(self, first: int, after: int, start: int, end: int, into: Skeleton, depth: int) -> None:
        """``xml[start:end]`` (tokens ``first`` to ``after``) into ``into``: its outermost texts translated."""
        position = start
        index = first
        while index < after:
            element = self.elements.get(index)
            if element is None or element.name not in _TEXTS:
                index += 1
                continue
            into.literal(self.xml[position : element.start])
            if element.name in _PARAGRAPHS:
                self._paragraph(index, into, depth)
            else:
                self._alt_text(index, into)
            position = element.end
            index = self.closing.get(index, index) + 1
        into.literal(self.xml[position:end])

    def _alt_text(self, index: int, into: Skeleton) -> None:
        """An alternative text or description: its text prose (one with markup inside is kept)."""
        element = self.elements[index]
        if element.kept or self.closing.get(index) != index + 1:
            into.literal(self.xml[element.start : element.end])
            return
        closing = self.tokens[index + 1]
        into.literal(self.xml[element.start : element.open_end])
        into.prose(self.xml[element.open_end : closing.start()], self.max_chars, escape="html")
        into.literal(self.xml[closing.start() : element.end])

    def _paragraph(self, index: int, into: Skeleton, depth: int) -> None:
        """The paragraph opened by token ``index``: its text one block in ``into``, the tags around it literal."""
        element = self.elements[index]
        if element.kept or index not in self.closing:
            into.literal(self.xml[element.start : element.end])
            return
        last = self.closing[index]
        into.literal(self.xml[element.start : element.open_end])
        tokens: list[str | Code] = []
        position = element.open_end
        cut_around_paragraphs = depth > 0  # a nested paragraph's segments are detached: no marks inside them
        inner = index + 1
        while inner < last:
            token = self.tokens[inner]
            if token.start() > position:
                tokens.append(self.xml[position : token.start()])
            inner, code = self._inline(inner, depth)
            if cut_around_paragraphs and ATTACHED_MARK in code.raw:
                self._block(tokens, into)
                into.literal(code.raw)
                tokens = []
            else:
                tokens.append(code)
            position = self.tokens[inner - 1].end()
        closing = self.tokens[last]
        if closing.start() > position:
            tokens.append(self.xml[position : closing.start()])
        self._block(tokens, into)
        into.literal(self.xml[closing.start() : closing.end()])

    def _block(self, tokens: list[str | Code], into: Skeleton) -> None:
        if tokens:
            into.block(tokens, self.max_chars, escape="html")

    def _inline(self, index: int, depth: int) -> tuple[int, Code]:
        """The code for the markup at token ``index`` inside a paragraph, and the index of the token after it."""
        token = self.tokens[index]
        name = token.group(2)
        element = self.elements.get(index)
        if name is None or element is None:  # a comment, CDATA, a processing instruction, a closing tag
            if name is not None and name in _PAIRED:
                return index + 1, Code(token.group(0), "close", name)
            return index + 1, Code(token.group(0), "unit")
        if token.group(4):
            if name in _BREAKS:
                return index + 1, Code(token.group(0), "break")
            return index + 1, Code(token.group(0), "join" if name in _DROPPED else "unit")
        if name in _PAIRED:  # a note or text box inside it is an object of its own, met in turn
            return index + 1, Code(token.group(0), "open", name)
        after = self.closing[index] + 1  # an object (a field, a note, a frame): one unit, whole
        raw = self.xml[element.start : element.end]
        if element.holds_text and self.detach and depth < MAX_NESTING:
            raw = self._detached(index, after, depth + 1)
        return after, Code(raw, "unit")

    def _detached(self, first: int, after: int, depth: int) -> str:
        """Tokens ``first`` to ``after`` as markup holding the places of their texts' (detached) segments."""
        inner = Skeleton()
        self._walk(first, after, self.tokens[first].start(), self.tokens[after - 1].end(), inner, depth)
        if not inner.segments:  # (reading them writes out the literals still pending)
            return inner.source()
        out: list[str] = []
        for part in inner.parts:
            if isinstance(part, Segment):
                index = self.skeleton.add_detached(part)  # None: nothing to translate, kept as written
                out.append(part.raw if index is None else attached_place(index))
            elif isinstance(part, str):
                out.append(part)
            else:  # a paragraph's block holds only literals and segments
                raise TypeError(f"unexpected part {part!r} in a nested paragraph")
        return "".join(out)


def _attributes(markup: str) -> dict[str, str]:
    """An opening tag's attributes by name (their values as written)."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTRIBUTE.finditer(markup)}


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """``content.xml`` or ``styles.xml``: each paragraph translated; ``meta.xml``: the title, subject, description."""
    if "<!DOCTYPE" in xml:  # OpenDocument never declares one; its entities would not survive the translation
        raise InvalidJobError(
            f"this OpenDocument file is damaged: {name} has a <!DOCTYPE>, which OpenDocument never has"
        )
    try:
        ElementTree.fromstring(xml.encode())
    except ElementTree.ParseError as exc:
        raise InvalidJobError(f"this OpenDocument file is damaged: {name} is not well-formed XML ({exc})") from None
    if name == "meta.xml":
        _meta(xml, max_chars, skeleton)
        return
    try:
        _Part(xml, skeleton, max_chars).split()
    except InvalidJobError as exc:
        raise InvalidJobError(f"this OpenDocument file is damaged: {name}: {exc}") from None


def _meta(xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """The document's title, subject and description translated; the rest of its metadata literal."""
    position = 0
    for match in _META_TEXT.finditer(xml):
        skeleton.literal(xml[position : match.start(3)])
        skeleton.prose(match.group(3), max_chars, escape="html")
        position = match.end(3)
    skeleton.literal(xml[position:])


MANIFEST = "META-INF/manifest.xml"


def _refuse_encrypted(names: list[str], read: MemberReader) -> set[str]:
    """No member chosen beyond the format's own; a clear error if the file is password-protected.

    LibreOffice encrypts a password-protected file's members inside an ordinary zip and says so in its
    manifest (``manifest:encryption-data``): the members read as random bytes, not as a damaged file.
    """
    manifest = read(MANIFEST) or b""
    if b"encryption-data" in manifest:
        raise InvalidJobError(
            "this OpenDocument file is password-protected (its content is encrypted): "
            "save it again without a password and send it again"
        )
    return set()


def _format(name: str, kind: str, subtype: str) -> ZipFormat:
    return ZipFormat(
        name=name,
        kind=kind,
        required="content.xml",
        text_parts=re.compile(r"content\.xml|styles\.xml|meta\.xml"),
        split_part=split_part,
        mimetype=f"application/vnd.oasis.opendocument.{subtype}",
        text_members=_refuse_encrypted,
    )


ODT = _format("odt", "an OpenDocument text document", "text")
"""OpenDocument text (LibreOffice Writer): body, tables, footnotes, text boxes, headers and footers."""
ODP = _format("odp", "an OpenDocument presentation", "presentation")
"""OpenDocument presentations (LibreOffice Impress): slides' text boxes and speaker notes."""
ODS = _format("ods", "an OpenDocument spreadsheet", "spreadsheet")
"""OpenDocument spreadsheets (LibreOffice Calc): text cells and comments; numbers, dates and formulas kept."""

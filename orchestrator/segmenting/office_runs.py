"""Office Open XML paragraphs: each paragraph's text as whole sentences, run formatting as placeholder tags.

Word (``w:p``/``w:r``/``w:t``/``w:rPr``), DrawingML (``a:p``/``a:r``/``a:t``/``a:rPr``: PowerPoint's
slides and notes, charts, SmartArt, text boxes) and SpreadsheetML rich text (``<si>``/``<r>``/``<t>``/
``<rPr>``) write a paragraph the same way: runs of text, each with its formatting. One
implementation reads all three, told the element names by a :class:`RunMarkup`.

In a paragraph the text of its text nodes is the prose. Between two text nodes sits markup: the
end of one run and the start of the next (its formatting), a tab, a line break, a field, the
start or end of a hyperlink. A run boundary whose formatting is the same on both sides is
invisible to the model and dropped from the translation (Word and PowerPoint split runs for
spell-checking and revision ids); a formatting change is a unit tag; the start and end of an
element around several runs (a hyperlink, an insertion) are paired tags, so the translation keeps
them nested. An *opaque* element (a DrawingML field: a slide number, a date; a phonetic reading)
is kept whole with its text. A paragraph whose markup cannot be expressed that way is translated
text node by text node.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Container
from dataclasses import dataclass

from orchestrator.segmenting.parts import Code, tokens_between
from orchestrator.segmenting.skeleton import Skeleton

_TAG = re.compile(r"<(/?)([\w:.-]+)(?:\s[^>]*?)?(/?)>")


@dataclass(frozen=True, slots=True)
class RunMarkup:
    """The element names one Office Open XML vocabulary writes its paragraphs, runs and text with."""

    paragraph: str
    """The paragraph element's local name (``p``; ``si`` for a shared string)."""
    namespaces: tuple[str, ...]
    """The vocabulary's namespace URIs (transitional, strict): the part's prefix for them is looked up."""
    prefix: str
    """The usual prefix (``w``, ``a``; empty for the default namespace), for a part that declares none."""
    run: str = "r"
    text: str = "t"
    properties: str = "rPr"
    invisible: tuple[str, ...] = ()
    """Empty elements between runs that are neither text nor formatting (Word's spell-check marks)."""
    opaque: tuple[str, ...] = ()
    """Elements kept whole, their text never translated (a DrawingML field, a phonetic reading)."""
    volatile: tuple[str, ...] = ()
    """Run property attributes that are not formatting (spell-check state): ignored when runs are compared."""
    breaks: tuple[str, ...] = ()
    """Line break elements between runs (DrawingML's ``a:br``): a sentence may end at one."""
    line_breaks: bool = False
    """Whether a newline in a text node is a line break (SpreadsheetML), and ``_xHHHH_`` an escaped character."""


WORD = RunMarkup(
    paragraph="p",
    namespaces=(
        "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
        "http://purl.oclc.org/ooxml/wordprocessingml/main",
    ),
    prefix="w",
    invisible=("proofErr", "lastRenderedPageBreak"),
)
"""WordprocessingML: ``w:p``, ``w:r``, ``w:t``, ``w:rPr``."""

DRAWING = RunMarkup(
    paragraph="p",
    namespaces=("http://schemas.openxmlformats.org/drawingml/2006/main", "http://purl.oclc.org/ooxml/drawingml/main"),
    prefix="a",
    opaque=("fld",),
    breaks=("br",),
    volatile=("lang", "altLang", "dirty", "err", "noProof", "smtClean", "smtId"),
)
"""DrawingML text (slides, notes, charts, SmartArt, shapes): ``a:p``, ``a:r``, ``a:t``, ``a:rPr``; ``a:fld`` kept."""

_SPREADSHEET_NAMESPACES = (
    "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "http://purl.oclc.org/ooxml/spreadsheetml/main",
)
SHARED_STRING = RunMarkup(
    paragraph="si", namespaces=_SPREADSHEET_NAMESPACES, prefix="", opaque=("rPh",), line_breaks=True
)
"""A SpreadsheetML shared string (``<si>``): plain ``<t>`` or rich-text runs; phonetic readings (``rPh``) kept."""
INLINE_STRING = RunMarkup(
    paragraph="is", namespaces=_SPREADSHEET_NAMESPACES, prefix="", opaque=("rPh",), line_breaks=True
)
"""A SpreadsheetML inline string in a sheet's cell (``<is>``)."""
COMMENT = RunMarkup(paragraph="text", namespaces=_SPREADSHEET_NAMESPACES, prefix="", line_breaks=True)
"""A SpreadsheetML cell comment's text (``<comment><text>``)."""


@dataclass(frozen=True, slots=True)
class _Patterns:
    """A :class:`RunMarkup`'s regular expressions for one prefix."""

    paragraph: re.Pattern[str]
    text_node: re.Pattern[str]  # a text node (group "text") or an opaque element (no "text")
    run_start: re.Pattern[str]
    properties: re.Pattern[str]
    invisible: re.Pattern[str]
    text_start: re.Pattern[str]
    boundary: frozenset[str]  # balanced by every run boundary
    volatile: re.Pattern[str] | None
    break_element: re.Pattern[str] | None
    line_break: re.Pattern[str] | None


def _inside(name: str) -> str:
    """A regex for an element's content up to its end tag that never runs past another tag of that name.

    An element left unclosed then fails at the next one's start instead of at the end of the text:
    a paragraph of thousands of unclosed fields is read in linear time, not quadratic.
    """
    return rf"[^<]*(?:<(?!/?{name}[\s/>])[^<]*)*"


@functools.lru_cache(maxsize=32)
def _patterns(markup: RunMarkup, prefix: str) -> _Patterns:
    def name(local: str) -> str:
        return f"{prefix}:{local}" if prefix else local

    def q(local: str) -> str:
        return re.escape(name(local))

    p, r, t, rpr = q(markup.paragraph), q(markup.run), q(markup.text), q(markup.properties)
    text_node = rf"<{t}(?:\s[^>]*)?>(?P<text>[^<]*)</{t}>"
    if markup.opaque:
        names = "|".join(q(local) for local in markup.opaque)
        body = _inside("(?P=opaque)")
        text_node = rf"<(?P<opaque>{names})(?=[\s/>])(?:[^>]*/>|[^>]*>{body}</(?P=opaque)>)|{text_node}"
    invisible = "|".join([f"</{t}>", f"</{r}>", *(rf"<{q(local)}\b[^>]*/>" for local in markup.invisible)])
    volatile = "|".join(re.escape(local) for local in markup.volatile)
    breaks = "|".join(q(local) for local in markup.breaks)
    return _Patterns(
        paragraph=re.compile(rf"<(/?){p}(?=[\s>/])[^>]*?(/?)>"),
        text_node=re.compile(text_node, re.DOTALL),
        run_start=re.compile(rf"<{r}(?=[\s>])[^>]*>"),
        properties=re.compile(rf"<{rpr}(?:\s[^>]*)?>{_inside(rpr)}</{rpr}>|<{rpr}(?:\s[^>]*)?/>"),
        invisible=re.compile(invisible),
        text_start=re.compile(rf"<{t}(?:\s[^>]*)?>"),
        boundary=frozenset(name(local) for local in (markup.text, markup.run, markup.properties)),
        volatile=re.compile(rf"\s(?:{volatile})=(?:\"[^\"]*\"|'[^']*')") if volatile else None,
        break_element=re.compile(rf"<(?:{breaks})(?=[\s/>])") if breaks else None,
        line_break=re.compile(r"(?:_x000[dD]_)?\r?\n|_x[0-9A-Fa-f]{4}_") if markup.line_breaks else None,
    )


def part_prefix(xml: str, markup: RunMarkup) -> str:
    """The prefix ``xml`` declares for ``markup``'s namespace (empty: the default one), else the usual one."""
    uris = "|".join(re.escape(uri) for uri in markup.namespaces)
    declared = re.search(rf"\sxmlns(?::([\w.-]+))?\s*=\s*[\"'](?:{uris})[\"']", xml)
    if declared is None:
        return markup.prefix
    return declared.group(1) or ""


def split_paragraphs(
    xml: str, markup: RunMarkup, max_chars: int, skeleton: Skeleton, keep: Container[int] = ()
) -> None:
    """An XML part: each innermost ``markup`` paragraph translated, everything around it literal.

    ``keep``: the paragraphs kept as they are, by their place among all the part's paragraphs
    (from 0, an empty one counted too): an Excel shared string is referred to by that place.
    """
    patterns = _patterns(markup, part_prefix(xml, markup))
    position = 0
    for start, end, ordinal in _leaf_paragraphs(xml, patterns):
        if ordinal in keep:
            continue
        skeleton.literal(xml[position:start])
        _Paragraph(patterns, xml[start:end]).split(skeleton, max_chars)
        position = end
    skeleton.literal(xml[position:])


def preserve_edge_spaces(xml: str, markup: RunMarkup) -> str:
    """``xml`` with ``xml:space="preserve"`` on every text node that starts or ends with whitespace and lacks it.

    Word and Excel drop a text node's leading and trailing whitespace unless it says so, and a translation
    moves spaces between runs ("Hello<x1/> world" as "Salut <x1/>monde"): without it the two words join.
    Applied to a translated part as it is zipped; a part Office wrote already says so wherever it must.
    """
    prefix = part_prefix(xml, markup)
    t = re.escape(f"{prefix}:{markup.text}" if prefix else markup.text)

    def preserve(node: re.Match[str]) -> str:
        return f'{node.group(1)} xml:space="preserve"{node.group(2)}'

    return re.sub(rf"(<{t}(?![^>]*\sxml:space\s*=)(?:\s[^>]*)?)(>(?=\s|[^<]*\s</{t}>)[^<]*</{t}>)", preserve, xml)


def paragraph_pattern(xml: str, markup: RunMarkup) -> re.Pattern[str]:
    """A ``markup`` paragraph tag as ``xml`` writes it (group 1: the ``/`` of a closing one; 2: of an empty one)."""
    return _patterns(markup, part_prefix(xml, markup)).paragraph


def _leaf_paragraphs(xml: str, patterns: _Patterns) -> list[tuple[int, int, int]]:
    """Spans of paragraph text to translate, in order, with their paragraph's place.

    A paragraph that holds no paragraph is one span. One that holds paragraphs (a Word text box's
    ``w:txbxContent`` sits in a run of the paragraph it is anchored in) is cut around them: its own
    text before, between and after them is a span of its own, and each inner paragraph is met in turn.
    """
    stack: list[tuple[int, int, list[tuple[int, int]]]] = []  # (start, place, its child paragraphs' spans)
    spans: list[tuple[int, int, int]] = []
    ordinal = -1
    for tag in patterns.paragraph.finditer(xml):
        if not tag.group(1):
            ordinal += 1
        if tag.group(2):  # <w:p/>: empty
            continue
        if not tag.group(1):
            stack.append((tag.start(), ordinal, []))
        elif stack:
            start, place, children = stack.pop()
            if stack:
                stack[-1][2].append((start, tag.end()))
            edges = [start, *(edge for child in children for edge in child), tag.end()]
            spans.extend((edges[i], edges[i + 1], place) for i in range(0, len(edges), 2))
    spans.sort()
    return spans


class _Paragraph:
    """One paragraph's XML, cut into its text nodes and the markup between them."""

    def __init__(self, patterns: _Patterns, xml: str) -> None:
        self.patterns = patterns
        self.xml = xml
        self.nodes = [node for node in patterns.text_node.finditer(xml) if node.group("text") is not None]

    def split(self, skeleton: Skeleton, max_chars: int) -> None:
        """Markup before the first and after the last text node literal, the rest one block."""
        paragraph, nodes = self.xml, self.nodes
        if not nodes:
            skeleton.literal(paragraph)
            return
        skeleton.literal(paragraph[: nodes[0].start("text")])
        tokens: list[str | Code] = self._text_tokens(nodes[0].group("text"))
        run_format = self._run_format(paragraph[: nodes[0].start("text")])
        for previous, node in itertools.pairwise(nodes):
            chunk = paragraph[previous.end("text") : node.start("text")]
            code = self._chunk_code(chunk, run_format)
            if code is None:  # markup the tags cannot carry: each text node on its own
                self._node_by_node(skeleton, max_chars)
                return
            next_format = self._run_format(chunk)
            run_format = next_format if next_format is not None else run_format
            tokens += [code, *self._text_tokens(node.group("text"))]
        skeleton.block(tokens, max_chars, escape="html")
        skeleton.literal(paragraph[nodes[-1].end("text") :])

    def _text_tokens(self, text: str) -> list[str | Code]:
        """A text node's text; in SpreadsheetML its newlines are line breaks and ``_xHHHH_`` escapes units."""
        if self.patterns.line_break is None:
            return [text]

        def code(match: re.Match[str]) -> Code:
            escaped = match.group(0).startswith("_") and "\n" not in match.group(0)
            return Code(match.group(0), "unit" if escaped else "break")

        return tokens_between(text, self.patterns.line_break, code)

    def _node_by_node(self, skeleton: Skeleton, max_chars: int) -> None:
        """The fallback: every text node its own prose (the parts before the first node are already written)."""
        paragraph, nodes = self.xml, self.nodes
        for index, node in enumerate(nodes):
            if index:
                skeleton.literal(paragraph[nodes[index - 1].end("text") : node.start("text")])
            tokens = self._text_tokens(node.group("text"))
            if len(tokens) == 1 and isinstance(tokens[0], str):
                skeleton.prose(tokens[0], max_chars, escape="html")
            else:
                skeleton.block(tokens, max_chars, escape="html")
        skeleton.literal(paragraph[nodes[-1].end("text") :])

    def _run_format(self, markup: str) -> str | None:
        """The formatting of the last run that starts in ``markup`` (``None``: none starts there).

        Attributes that are not formatting (a spell-check flag, a language) are left out.
        """
        starts = list(self.patterns.run_start.finditer(markup))
        if not starts:
            return None
        properties = self.patterns.properties.search(markup, starts[-1].end())
        found = properties.group(0) if properties else ""
        return found if self.patterns.volatile is None else self.patterns.volatile.sub("", found)

    def _chunk_code(self, chunk: str, run_format: str | None) -> Code | None:
        """The code for the markup between two text nodes (``None``: it opens and closes elements at once)."""
        patterns = self.patterns
        opened: list[str] = []
        closed: list[str] = []
        for tag in _TAG.finditer(chunk):
            closing, name, empty = bool(tag.group(1)), tag.group(2), bool(tag.group(3))
            if empty or name in patterns.boundary:
                continue
            if closing:
                if opened and opened[-1] == name:
                    opened.pop()
                else:
                    closed.append(name)
            else:
                opened.append(name)
        if (opened and closed) or len(opened) > 1 or len(closed) > 1:
            return None
        if opened:
            return Code(chunk, "open", opened[0])
        if closed:
            return Code(chunk, "close", closed[0])
        starts = list(patterns.run_start.finditer(chunk))
        if starts and run_format is not None:
            before = patterns.invisible.sub("", chunk[: starts[-1].start()])
            after = patterns.properties.sub("", chunk[starts[-1].end() :], count=1)
            if not before and patterns.text_start.fullmatch(after) and self._run_format(chunk) == run_format:
                return Code(chunk, "join")  # the same formatting on both sides: one text run to the model
        if patterns.break_element is not None and patterns.break_element.search(chunk):
            return Code(chunk, "break")
        return Code(chunk, "unit")

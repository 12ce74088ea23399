"""Word documents (``.docx``): each paragraph's text as whole sentences, Word run formatting as placeholder tags.

A ``.docx`` is a zip of XML parts (``orchestrator.segmenting.zip_container`` opens and closes it).
The body, headers, footers, footnotes and endnotes are translated; styles, images, settings
and every other member come back byte for byte.

In a paragraph (``<w:p>``) the text of its ``<w:t>`` nodes is the prose. Between two text nodes
sits markup: the end of one Word run (``<w:r>``) and the start of the next (its formatting), a
tab, a field character, the start or end of a hyperlink. A Word run boundary whose formatting is
the same on both sides is invisible to the model and dropped from the translation (Word splits
runs for spell-checking and revision ids); a formatting change is a unit tag; the start and end
of an element around several Word runs (a hyperlink, an insertion) are paired tags, so the translation
keeps them nested. A paragraph whose markup cannot be expressed that way is translated text
node by text node. Each translated part must still parse as XML, or the assembly fails with the
reason instead of writing a broken file.
"""

from __future__ import annotations

import itertools
import re

from orchestrator.segmenting.parts import Code
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import ZipFormat

_PARAGRAPH_TAG = re.compile(r"<(/?)w:p(?=[\s>/])[^>]*?(/?)>")
_TEXT_NODE = re.compile(r"<w:t(?:\s[^>]*)?>([^<]*)</w:t>")
_TAG = re.compile(r"<(/?)([\w:]+)(?:\s[^>]*?)?(/?)>")
_RUN_START = re.compile(r"<w:r(?=[\s>])[^>]*>")
_RUN_PROPERTIES = re.compile(r"<w:rPr>.*?</w:rPr>|<w:rPr/>", re.DOTALL)
_INVISIBLE = re.compile(r"</w:t>|</w:r>|<w:proofErr\b[^>]*/>|<w:lastRenderedPageBreak/>")
_TEXT_START = re.compile(r"<w:t(?:\s[^>]*)?>")
_BOUNDARY_TAGS = frozenset({"w:t", "w:r", "w:rPr"})  # balanced by every Word run boundary


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """A body, header, footer, footnotes or endnotes part: each innermost paragraph translated, the rest literal."""
    _part(skeleton, xml, max_chars)


def _part(skeleton: Skeleton, xml: str, max_chars: int) -> None:
    """An XML part: each innermost paragraph translated, everything around it literal."""
    position = 0
    for start, end in _leaf_paragraphs(xml):
        skeleton.literal(xml[position:start])
        _paragraph(skeleton, xml[start:end], max_chars)
        position = end
    skeleton.literal(xml[position:])


def _leaf_paragraphs(xml: str) -> list[tuple[int, int]]:
    """Spans of the paragraphs that hold no paragraph themselves (a text box's are inside another)."""
    stack: list[list[int]] = []  # [start, has a child paragraph]
    leaves: list[tuple[int, int]] = []
    for tag in _PARAGRAPH_TAG.finditer(xml):
        if tag.group(2):  # <w:p/>: empty
            continue
        if not tag.group(1):
            if stack:
                stack[-1][1] = 1
            stack.append([tag.start(), 0])
        elif stack:
            start, has_child = stack.pop()
            if not has_child:
                leaves.append((start, tag.end()))
    return leaves


def _paragraph(skeleton: Skeleton, paragraph: str, max_chars: int) -> None:
    """One paragraph: markup before the first and after the last text node literal, the rest one block."""
    nodes = list(_TEXT_NODE.finditer(paragraph))
    if not nodes:
        skeleton.literal(paragraph)
        return
    skeleton.literal(paragraph[: nodes[0].start(1)])
    tokens: list[str | Code] = [nodes[0].group(1)]
    run_format = _run_format(paragraph[: nodes[0].start(1)])
    for previous, node in itertools.pairwise(nodes):
        chunk = paragraph[previous.end(1) : node.start(1)]
        code = _chunk_code(chunk, run_format)
        if code is None:  # markup the tags cannot carry: each text node on its own
            _node_by_node(skeleton, paragraph, nodes, max_chars)
            return
        next_format = _run_format(chunk)
        run_format = next_format if next_format is not None else run_format
        tokens += [code, node.group(1)]
    skeleton.block(tokens, max_chars, escape="html")
    skeleton.literal(paragraph[nodes[-1].end(1) :])


def _node_by_node(skeleton: Skeleton, paragraph: str, nodes: list[re.Match[str]], max_chars: int) -> None:
    """The fallback: every text node its own prose (the parts before the first node are already written)."""
    for index, node in enumerate(nodes):
        if index:
            skeleton.literal(paragraph[nodes[index - 1].end(1) : node.start(1)])
        skeleton.prose(node.group(1), max_chars, escape="html")
    skeleton.literal(paragraph[nodes[-1].end(1) :])


def _run_format(markup: str) -> str | None:
    """The formatting (``w:rPr``) of the last Word run that starts in ``markup`` (``None``: none starts there)."""
    starts = list(_RUN_START.finditer(markup))
    if not starts:
        return None
    properties = _RUN_PROPERTIES.search(markup, starts[-1].end())
    return properties.group(0) if properties else ""


def _chunk_code(chunk: str, run_format: str | None) -> Code | None:
    """The code for the markup between two text nodes (``None``: it opens and closes elements at once)."""
    opened: list[str] = []
    closed: list[str] = []
    for tag in _TAG.finditer(chunk):
        closing, name, empty = bool(tag.group(1)), tag.group(2), bool(tag.group(3))
        if empty or name in _BOUNDARY_TAGS:
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
    starts = list(_RUN_START.finditer(chunk))
    if starts and run_format is not None:
        before = _INVISIBLE.sub("", chunk[: starts[-1].start()])
        after = _RUN_PROPERTIES.sub("", chunk[starts[-1].end() :], count=1)
        if not before and _TEXT_START.fullmatch(after) and _run_format(chunk) == run_format:
            return Code(chunk, "join")  # the same formatting on both sides: one text run to the model
    return Code(chunk, "unit")


DOCX = ZipFormat(
    name="docx",
    kind="a Word document",
    required="word/document.xml",
    text_parts=re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes)\.xml"),
    split_part=split_part,
)
"""Word documents: the body, headers, footers, footnotes and endnotes translated."""

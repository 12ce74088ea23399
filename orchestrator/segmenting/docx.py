"""Word documents (``.docx``): each paragraph's text as whole sentences, Word run formatting as placeholder tags.

A ``.docx`` is a zip of XML parts (``orchestrator.segmenting.zip_container`` opens and closes it).
The body, headers, footers, footnotes and endnotes are translated; styles, images, settings
and every other member come back byte for byte. Their paragraphs (``w:p``) are read by the
Office Open XML paragraph machinery every Office format shares
(:mod:`orchestrator.segmenting.office_runs`): runs of the same formatting joined, a formatting
change a unit tag, a hyperlink a pair of tags. Each translated part must still parse as XML, or
the assembly fails with the reason instead of writing a broken file.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.office_runs import WORD, preserve_edge_spaces, split_paragraphs
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import ZipFormat


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """A body, header, footer, footnotes or endnotes part: each innermost paragraph translated, the rest literal."""
    split_paragraphs(xml, WORD, max_chars, skeleton)


def finish_part(name: str, xml: str) -> str:
    """A translated part: a space the translation put at a run's edge kept (Word drops it otherwise)."""
    return preserve_edge_spaces(xml, WORD)


DOCX = ZipFormat(
    name="docx",
    kind="a Word document",
    required="word/document.xml",
    text_parts=re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes)\.xml"),
    split_part=split_part,
    finish_part=finish_part,
    checks_xml=True,
)
"""Word documents: the body, headers, footers, footnotes and endnotes translated."""

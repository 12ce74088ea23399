"""Excel workbooks (``.xlsx``): cell text, comments, charts and shapes translated; formulas and numbers never.

A ``.xlsx`` is a zip of XML parts (``orchestrator.segmenting.zip_container`` opens and closes it).
A cell's text lives in the shared strings (``xl/sharedStrings.xml``, ``<si>``: a plain ``<t>`` or
rich-text runs) or inline in a sheet (``<is>``); both are read by the Office Open XML paragraph
machinery every Office format shares (:mod:`orchestrator.segmenting.office_runs`), a newline in
a cell as a line break. In a sheet only the inline strings are touched: formulas (``<f>``), their
cached results and numbers (``<v>``) come back byte for byte. A shared string without letters
(a number, a code) stays as it is. Cell comments are translated, and the DrawingML text of charts
and shapes.

Sheet names (``xl/workbook.xml``) are kept: formulas, defined names, charts, pivot tables and other
workbooks refer to a sheet by its name (``'Sheet 1'!A1``), and a renamed sheet breaks them.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.office_runs import (
    COMMENT,
    DRAWING,
    INLINE_STRING,
    SHARED_STRING,
    RunMarkup,
    split_paragraphs,
)
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import ZipFormat

_MARKUP_OF_PART = (
    (re.compile(r"xl/sharedStrings\.xml"), SHARED_STRING),
    (re.compile(r"xl/worksheets/sheet\d+\.xml"), INLINE_STRING),
    (re.compile(r"xl/comments\d+\.xml"), COMMENT),
    (re.compile(r"xl/(?:charts/chart|drawings/drawing)\d+\.xml"), DRAWING),
)


def _markup(name: str) -> RunMarkup:
    """How part ``name``'s paragraphs are written."""
    for pattern, markup in _MARKUP_OF_PART:
        if pattern.fullmatch(name):
            return markup
    raise ValueError(f"{name} is not a translated part of a workbook")


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """Shared strings, a sheet's inline strings, comments, a chart or a drawing: their text translated."""
    split_paragraphs(xml, _markup(name), max_chars, skeleton)


XLSX = ZipFormat(
    name="xlsx",
    kind="an Excel workbook",
    required="xl/workbook.xml",
    text_parts=re.compile("|".join(pattern.pattern for pattern, _ in _MARKUP_OF_PART)),
    split_part=split_part,
)
"""Excel workbooks: shared strings, inline strings, comments, charts and drawings translated."""

"""Excel workbooks (``.xlsx``): cell text, comments, charts and shapes translated; formulas and numbers never.

A ``.xlsx`` is a zip of XML parts (``orchestrator.segmenting.zip_container`` opens and closes it).
A cell's text lives in the shared strings (``xl/sharedStrings.xml``, ``<si>``: a plain ``<t>`` or
rich-text runs) or inline in a sheet (``<is>``); both are read by the Office Open XML paragraph
machinery every Office format shares (:mod:`orchestrator.segmenting.office_runs`), a newline in
a cell as a line break. In a sheet only the inline strings are touched: formulas (``<f>``), their
cached results and numbers (``<v>``) come back byte for byte. A shared string without letters
(a number, a code) stays as it is. Cell comments are translated, and the DrawingML text of charts
and shapes.

Kept on purpose, because other parts refer to them by their text:

- sheet names (``xl/workbook.xml``): formulas, defined names, charts, pivot tables and other
  workbooks name a sheet (``'Sheet 1'!A1``), and a renamed sheet breaks them;
- the header (and totals) cells of an Excel table (``xl/tables/``): the table names its columns
  with the same text, formulas refer to them (``Table1[Price]``), and Excel repairs a workbook
  whose header cells differ from its table's column names.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Container
from dataclasses import dataclass, field

from orchestrator.segmenting.office_runs import (
    COMMENT,
    DRAWING,
    INLINE_STRING,
    SHARED_STRING,
    RunMarkup,
    paragraph_pattern,
    part_prefix,
    preserve_edge_spaces,
    split_paragraphs,
)
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import Members, PartSplitter, ZipFormat

_SHARED_STRINGS = "xl/sharedStrings.xml"
_MARKUP_OF_PART = (
    (re.compile(re.escape(_SHARED_STRINGS)), SHARED_STRING),
    (re.compile(r"xl/worksheets/sheet\d+\.xml"), INLINE_STRING),
    (re.compile(r"xl/comments\d+\.xml"), COMMENT),
    (re.compile(r"xl/(?:charts/chart|drawings/drawing)\d+\.xml"), DRAWING),
)
_RELATIONSHIP = re.compile(r"<Relationship\b[^>]*>")
_ATTRIBUTE = re.compile(r"""([\w:]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_TABLE = re.compile(r"<(?:[\w.-]+:)?table\b[^>]*>")
_RANGE = re.compile(r"\$?([A-Z]{1,3})\$?(\d+)(?::\$?([A-Z]{1,3})\$?(\d+))?")
_CELL_REFERENCE = re.compile(r"([A-Z]{1,3})(\d+)")


def _markup(name: str) -> RunMarkup:
    """How part ``name``'s paragraphs are written."""
    for pattern, markup in _MARKUP_OF_PART:
        if pattern.fullmatch(name):
            return markup
    raise ValueError(f"{name} is not a translated part of a workbook")


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """Shared strings, a sheet's inline strings, comments, a chart or a drawing: their text translated."""
    split_paragraphs(xml, _markup(name), max_chars, skeleton)


def finish_part(name: str, xml: str) -> str:
    """A translated string part: a space the translation put at a run's edge kept (Excel drops it otherwise).

    DrawingML text (a chart, a shape) keeps its spaces as written and has no ``xml:space``.
    """
    markup = _markup(name)
    return xml if markup is DRAWING else preserve_edge_spaces(xml, markup)


@dataclass(slots=True)
class _KeptCells:
    """The text a workbook's tables name their columns with: which shared strings and inline strings stay."""

    shared: set[int] = field(default_factory=set)
    """Indexes of shared strings (``<si>``) that a table's header or totals cell shows."""
    inline: dict[str, set[int]] = field(default_factory=dict)
    """Per sheet, the places of its inline strings (``<is>``) in such cells."""

    def split_part(self, name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
        """:func:`split_part`, with the table header and totals cells kept."""
        keep: Container[int] = self.shared if name == _SHARED_STRINGS else self.inline.get(name, ())
        split_paragraphs(xml, _markup(name), max_chars, skeleton, keep)


def plan(members: Members) -> PartSplitter:
    """The splitter for one workbook: every text part translated except the cells its tables name columns by."""
    kept = _KeptCells()
    for sheet in members.names():
        if not _MARKUP_OF_PART[1][0].fullmatch(sheet):
            continue
        cells = _table_cells(members, sheet)
        xml = members.text(sheet) if cells else None
        if xml is not None:
            _keep_cells(xml, sheet, cells, kept)
    if not kept.shared and not kept.inline:
        return split_part
    return kept.split_part


def _attributes(tag: str) -> dict[str, str]:
    """A start tag's attributes by name (as written, entities left as they are)."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _ATTRIBUTE.finditer(tag)}


def _table_cells(members: Members, sheet: str) -> set[tuple[int, int]]:
    """``(column, row)`` of every header and totals cell of the tables on ``sheet`` (1-based)."""
    folder, file = posixpath.split(sheet)
    relationships = members.text(f"{folder}/_rels/{file}.rels") or ""
    cells: set[tuple[int, int]] = set()
    for relationship in _RELATIONSHIP.finditer(relationships):
        attributes = _attributes(relationship.group(0))
        if not attributes.get("Type", "").endswith("/table") or attributes.get("TargetMode") == "External":
            continue
        target = attributes.get("Target", "")
        path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
        table = _TABLE.search(members.text(path) or "")
        if table is None:
            continue
        attributes = _attributes(table.group(0))
        bounds = _RANGE.fullmatch(attributes.get("ref", ""))
        if bounds is None:
            continue
        first_column, first_row = _column(bounds.group(1)), int(bounds.group(2))
        last_column = _column(bounds.group(3) or bounds.group(1))
        last_row = int(bounds.group(4) or bounds.group(2))
        rows = []
        if attributes.get("headerRowCount", "1") != "0":
            rows.append(first_row)
        if attributes.get("totalsRowCount", "0") != "0":
            rows.append(last_row)
        cells.update((column, row) for row in rows for column in range(first_column, last_column + 1))
    return cells


def _column(letters: str) -> int:
    """A column's number from its letters (``A`` 1, ``AA`` 27)."""
    number = 0
    for letter in letters:
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def _keep_cells(xml: str, sheet: str, cells: set[tuple[int, int]], kept: _KeptCells) -> None:
    """Note the shared strings and inline strings that ``cells`` of ``sheet`` hold."""
    paragraph = paragraph_pattern(xml, INLINE_STRING)
    prefix = part_prefix(xml, INLINE_STRING)
    q = re.escape(f"{prefix}:") if prefix else ""
    # a cell's body stops at the next cell's start too: an unclosed cell cannot make the scan quadratic
    cell_pattern = re.compile(rf"<{q}c(?=[\s/>])([^>]*?)(?:/>|>([^<]*(?:<(?!/?{q}c[\s/>])[^<]*)*)</{q}c>)")
    value = re.compile(rf"<{q}v>\s*(\d+)\s*</{q}v>")
    place = -1
    inline = kept.inline.setdefault(sheet, set())
    for cell in cell_pattern.finditer(xml):
        body = cell.group(2) or ""
        opened = [tag for tag in paragraph.finditer(body) if not tag.group(1)]
        attributes = _attributes(cell.group(1))
        reference = _CELL_REFERENCE.fullmatch(attributes.get("r", ""))
        in_table = reference is not None and (_column(reference.group(1)), int(reference.group(2))) in cells
        for _ in opened:
            place += 1
            if in_table:
                inline.add(place)
        if in_table and attributes.get("t") == "s" and (index := value.search(body)) is not None:
            kept.shared.add(int(index.group(1)))


XLSX = ZipFormat(
    name="xlsx",
    kind="an Excel workbook",
    required="xl/workbook.xml",
    text_parts=re.compile("|".join(pattern.pattern for pattern, _ in _MARKUP_OF_PART)),
    split_part=split_part,
    plan=plan,
    finish_part=finish_part,
    checks_xml=True,
)
"""Excel workbooks: shared strings, inline strings, comments, charts and drawings translated."""

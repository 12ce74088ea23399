"""PowerPoint presentations (``.pptx``): slides, speaker notes, charts and SmartArt translated.

A ``.pptx`` is a zip of XML parts (``orchestrator.segmenting.zip_container`` opens and closes it).
Its text is DrawingML (``a:p``/``a:r``/``a:t``), read by the Office Open XML paragraph machinery
every Office format shares (:mod:`orchestrator.segmenting.office_runs`): runs of the same
formatting joined, a formatting change a unit tag, a line break (``a:br``) a unit tag and a field
(``a:fld``: a slide number, a date) kept whole with its text. Slide layouts and masters are not
translated (their text is PowerPoint's prompt text, "Click to edit Master title style", which a
slide never shows); nor are comments, the theme or the media.
"""

from __future__ import annotations

import re

from orchestrator.segmenting.office_runs import DRAWING, split_paragraphs
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.zip_container import ZipFormat


def split_part(name: str, xml: str, max_chars: int, skeleton: Skeleton) -> None:
    """A slide, notes page, chart or SmartArt part: each DrawingML paragraph translated, the rest literal."""
    split_paragraphs(xml, DRAWING, max_chars, skeleton)


PPTX = ZipFormat(
    name="pptx",
    kind="a PowerPoint presentation",
    required="ppt/presentation.xml",
    text_parts=re.compile(
        r"ppt/(slides/slide\d+|notesSlides/notesSlide\d+|charts/chart\d+|diagrams/(?:data|drawing)\d+)\.xml"
    ),
    split_part=split_part,
    checks_xml=True,
)
"""PowerPoint presentations: slides, notes, charts' titles, SmartArt (its data and its drawing)."""

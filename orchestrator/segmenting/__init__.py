"""Documents as segments to translate and literal text to keep, and their reassembly.

:func:`split_document` turns a ``.txt``, ``.md`` or ``.html`` source into a :class:`Skeleton`:
an ordered list of parts: literal text (markup, code, whitespace, URLs) and segments (the prose).
Joining the parts with every segment untranslated gives the source back byte for byte; joining
them with translations gives the translated document with its structure intact.
"""

from __future__ import annotations

from orchestrator.segmenting.skeleton import Segment, Skeleton
from orchestrator.segmenting.split import split_document

__all__ = ["Segment", "Skeleton", "split_document"]

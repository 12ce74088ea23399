"""Choosing the splitter for a document's format, and checking that splitting changed nothing."""

from __future__ import annotations

from collections.abc import Callable

from contract.documents import FORMATS
from contract.errors import InvalidJobError
from orchestrator.segmenting.html_format import split_html
from orchestrator.segmenting.markdown_format import split_markdown
from orchestrator.segmenting.skeleton import Skeleton
from orchestrator.segmenting.text_format import split_text


def split_document(source: str, fmt: str, max_chars: int) -> Skeleton:
    """Cut ``source`` (a ``txt``, ``md`` or ``html`` document) into literals and segments."""
    splitters: dict[str, Callable[[str, int], Skeleton]] = {"txt": split_text, "md": split_markdown, "html": split_html}
    if fmt not in splitters:
        raise InvalidJobError(f"unsupported document format {fmt!r}; use one of {', '.join(FORMATS)}")
    if max_chars < 20:
        raise InvalidJobError("max segment length must be at least 20 characters")
    skeleton = splitters[fmt](source, max_chars)
    if skeleton.source() != source:  # an invariant; a bug here must never change a user's document
        raise InvalidJobError(f"this {fmt} document could not be split without changing it (a dragoman bug)")
    return skeleton

"""The context a document segment is sent with: the end of the segments before it."""

from __future__ import annotations

from collections.abc import Sequence

from contract.inline_tags import strip_tags
from orchestrator.segmenting.skeleton import Segment


def preceding_text(segments: Sequence[Segment], index: int, limit: int) -> str | None:
    """Up to ``limit`` characters of the text before segment ``index`` (``None``: none, or ``limit`` 0).

    Whole segments back from the previous one; the oldest is cut at a word so the context starts
    with a whole word. Placeholder tags are left out: the context is read, not translated.
    """
    if limit <= 0 or index == 0:
        return None
    parts: list[str] = []
    length = 0
    for previous in range(index - 1, -1, -1):
        text = " ".join(strip_tags(segments[previous].text).split())
        if not text:
            continue
        room = limit - length
        if len(text) > room:
            cut = text[len(text) - room :]
            space = cut.find(" ")
            if space != -1 and parts:
                parts.append(cut[space + 1 :])
            elif not parts:
                parts.append(cut[cut.find(" ") + 1 :] if " " in cut else cut)
            break
        parts.append(text)
        length += len(text) + 1
        if length >= limit:
            break
    context = " ".join(reversed([p for p in parts if p]))
    return context or None

"""Counts in the words the CLI prints: ``1 segment``, ``2 segments``, never ``1 segments`` or ``segment(s)``."""

from __future__ import annotations

from collections.abc import Sequence

LISTED = 10
"""How many entries of a long list (segments that fell back, flagged segments) the CLI prints; the rest are counted."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` in the number it takes: ``1 segment``, ``0 segments``, ``1,200 segments``.

    ``plural``: the plural where it is not ``noun + "s"`` (``entry``/``entries``).
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def more_line(entries: Sequence[object], where: str = "") -> str | None:
    """The line after the first :data:`LISTED` of ``entries``: ``  … and 5 more``; ``None`` if all were listed.

    ``where``: where the whole list is (``GET /v1/documents/ID``), said after the count.
    """
    left = len(entries) - LISTED
    if left <= 0:
        return None
    return f"  … and {left:,} more" + (f" ({where} lists every one)" if where else "")

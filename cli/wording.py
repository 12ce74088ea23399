"""How the CLI prints a long list: the first :data:`LISTED` entries, then how many more."""

from __future__ import annotations

from collections.abc import Sequence

LISTED = 10
"""How many entries of a long list (segments that fell back, flagged segments) the CLI prints; the rest are counted."""


def more_line(entries: Sequence[object], where: str = "") -> str | None:
    """The line after the first :data:`LISTED` of ``entries``: ``  … and 5 more``; ``None`` if all were listed.

    ``where``: where the whole list is (``GET /v1/documents/ID``), said after the count.
    """
    left = len(entries) - LISTED
    if left <= 0:
        return None
    return f"  … and {left:,} more" + (f" ({where} lists every one)" if where else "")

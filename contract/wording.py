"""Counts in words: ``1 segment``, ``2 segments``, never ``1 segments`` or ``segment(s)``."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` in the number it takes: ``1 segment``, ``0 segments``, ``1,200 segments``.

    ``plural``: the plural where it is not ``noun + "s"`` (``entry``/``entries``). Every message
    that prints a count a user reads (the CLI, the document report, errors) says it this way.
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"

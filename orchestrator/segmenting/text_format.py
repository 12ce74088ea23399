"""Plain text: every line is a segment of its own, so line breaks and blank lines stay exactly."""

from __future__ import annotations

from orchestrator.segmenting.skeleton import Skeleton


def split_text(source: str, max_chars: int, skeleton: Skeleton) -> None:
    """Each line's text is a segment; indentation, trailing spaces and line ends are literal."""
    for line in source.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        skeleton.prose(body, max_chars)
        skeleton.literal(line[len(body) :])

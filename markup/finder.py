"""Forward searches that remember what they found, so a lexer's or a splitter's scan stays linear on any input.

A regular expression such as ``<!--.*?-->`` tried at every ``<!--`` of a document in which
none is closed reads to the end of the document each time: ten thousand unclosed comments in
50 kB are 250 million steps. The lexer and the document splitters find their closing marks with a :class:`Finder`
instead: once a search for ``-->`` from position 100 found nothing, every later search from a
position past 100 knows the answer at once, and a search that found ``-->`` at 900 answers every
search from between 100 and 900 without reading again. Each character is read about once per
needle.
"""

from __future__ import annotations

import re


class Finder:
    """``str.find`` (or a one-character ``re`` search) over one text, answered from what earlier searches read."""

    __slots__ = ("_known", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        # needle -> (lo, found): ``found`` is the first match at or after ``lo`` (-1: none to the end).
        self._known: dict[str | re.Pattern[str], tuple[int, int]] = {}

    def find(self, needle: str | re.Pattern[str], start: int) -> int:
        """The position of the first match of ``needle`` at or after ``start``, or -1.

        ``needle`` is a string, or a compiled pattern that matches exactly one character.
        """
        known = self._known.get(needle)
        if known is not None:
            lo, found = known
            if lo <= start and (found == -1 or start <= found):
                return found
            if start < lo:  # read only the stretch not read before
                nearer = self._search(needle, start, lo + (len(needle) - 1 if isinstance(needle, str) else 0))
                found = nearer if nearer != -1 else found
                self._known[needle] = (start, found)
                return found
        found = self._search(needle, start, len(self._text))
        self._known[needle] = (start, found)
        return found

    def _search(self, needle: str | re.Pattern[str], start: int, end: int) -> int:
        if isinstance(needle, str):
            return self._text.find(needle, start, end)
        match = needle.search(self._text, start, end)
        return -1 if match is None else match.start()

    def first_of(self, needles: tuple[str, ...], start: int) -> int:
        """The position of the first of several one-character needles at or after ``start``, or -1."""
        hits = [hit for hit in (self.find(needle, start) for needle in needles) if hit != -1]
        return min(hits) if hits else -1

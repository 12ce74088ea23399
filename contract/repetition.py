"""Generation loops: a sequence whose tail is one span repeated over and over.

A model that loses its way repeats itself ("la la la la ...", or the same clause again and
again) until its output budget runs out. :func:`repeating_tail` finds that on anything
indexable: a generation's token ids (the worker's runaway control, while it generates and
after) or a translation's words (the ``repetition`` quality flag).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NamedTuple

DEFAULT_MAX_PERIOD = 32
"""The longest repeated span looked for, in items (tokens or words)."""
DEFAULT_MIN_REPEATS = 4
"""How many times a span must occur back to back at the end to be a loop."""
DEFAULT_MIN_LENGTH = 24
"""How many items the repeated tail must cover: four repeats of one short token are not yet a loop."""

TOKEN_MAX_PERIOD = DEFAULT_MAX_PERIOD
"""The longest repeated span looked for in a generation's token ids (the engine's watch and the worker's check)."""
TOKEN_MIN_REPEATS = 3
"""How many back-to-back occurrences of a span of token ids make a loop."""
TOKEN_MIN_LENGTH = 16
"""How many token ids a looping tail must cover.

Lower than the word-level defaults (4 repeats, 24 items) so that a short job's first budget (16 + 2 x
a few tokens) can show a loop: only a generation that did not finish is judged, and a false alarm
costs a sampled retry, not the job."""


class Repetition(NamedTuple):
    """A looping tail: from ``start`` on, a span of ``period`` items occurs ``repeats`` times (rounded down)."""

    start: int
    period: int
    repeats: int

    def span(self, items: Sequence[Hashable]) -> Sequence[Hashable]:
        """The repeated span itself (the evidence an error or a flag quotes)."""
        return items[self.start : self.start + self.period]


def repeating_tail(
    items: Sequence[Hashable],
    *,
    max_period: int = DEFAULT_MAX_PERIOD,
    min_repeats: int = DEFAULT_MIN_REPEATS,
    min_length: int = DEFAULT_MIN_LENGTH,
) -> Repetition | None:
    """The longest periodic tail of ``items`` that counts as a loop, or ``None``.

    A tail is periodic with period ``p`` when every item in it equals the item ``p`` before it.
    It counts when the span occurs at least ``min_repeats`` times and the tail covers at least
    ``min_length`` items. Of several periods the one covering the most items wins (the shortest
    on a tie, so "ab ab ab ab" is period 2, not 4). Cost: ``max_period`` passes over the tail.
    """
    n = len(items)
    best: Repetition | None = None
    best_length = 0
    for period in range(1, min(max_period, n // max(min_repeats, 1)) + 1):
        run = 0  # items at the end equal to the item `period` before them
        i = n - 1
        while i - period >= 0 and items[i] == items[i - period]:
            run += 1
            i -= 1
        length = run + period
        repeats = length // period
        if repeats < min_repeats or length < min_length or length <= best_length:
            continue
        best, best_length = Repetition(n - length, period, repeats), length
    return best


def repeating_token_tail(token_ids: Sequence[int]) -> Repetition | None:
    """:func:`repeating_tail` of a generation's token ids with the token thresholds (``TOKEN_*``).

    One definition of a looping generation for every place that looks for one: the engine
    watching a generation while it runs and the worker checking an output after it.
    """
    return repeating_tail(
        token_ids, max_period=TOKEN_MAX_PERIOD, min_repeats=TOKEN_MIN_REPEATS, min_length=TOKEN_MIN_LENGTH
    )

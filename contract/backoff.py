"""Exponential backoff with jitter, for every loop that waits out an outage or polls for a result.

The base delay starts at ``initial`` and is multiplied by ``factor`` after every wait, up to
``maximum``. What is actually waited is drawn around that base:

- ``"equal"`` jitter (the default): a random point in the upper half, ``[base/2, base)``. The
  fixed half keeps a retry from hammering a server that has just gone away; the random half
  spreads the retries of many workers that lost the same server at the same moment.
- ``"full"`` jitter: a random point in ``[0, base)``, for waits where an early retry costs nothing.

The random source is injectable (any callable returning a float in ``[0, 1)``), so tests can
make the draws deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Literal

Jitter = Literal["equal", "full"]


class Backoff:
    """The growing, jittered delays of one retry or polling loop; :meth:`reset` after a success."""

    __slots__ = ("_current", "_factor", "_full", "_initial", "_maximum", "_random")

    def __init__(
        self,
        initial: float,
        maximum: float,
        *,
        factor: float = 2.0,
        jitter: Jitter = "equal",
        random_source: Callable[[], float] = random.random,
    ) -> None:
        if not 0 < initial <= maximum:
            raise ValueError(f"backoff needs 0 < initial <= maximum, got initial={initial!r}, maximum={maximum!r}")
        if factor < 1:
            raise ValueError(f"backoff factor must be at least 1 (delays never shrink), got {factor!r}")
        if jitter not in ("equal", "full"):
            raise ValueError(f"backoff jitter must be 'equal' or 'full', got {jitter!r}")
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._full = jitter == "full"
        self._random = random_source
        self._current = initial

    @property
    def base(self) -> float:
        """The base delay the next :meth:`next_delay` draws from (before jitter)."""
        return self._current

    def next_delay(self, limit: float | None = None) -> float:
        """The seconds to wait now (jittered, at most ``limit``); the base then grows by ``factor``, up to ``maximum``.

        The backoff only says how long: the caller waits its own way (``await asyncio.sleep``
        in a coroutine, ``time.sleep`` or an ``Event.wait`` that a stop cuts short on a thread),
        so there is one backoff for every kind of loop. A ``limit`` (the time left before a
        deadline) caps the wait, and one already passed gives 0; the base grows either way.
        """
        base = self._current
        self._current = min(base * self._factor, self._maximum)
        delay = base * self._random() if self._full else base / 2 + base / 2 * self._random()
        return delay if limit is None else max(0.0, min(delay, limit))

    def reset(self) -> None:
        """Start again from ``initial`` (call it once the operation succeeds)."""
        self._current = self._initial


def retry_intervals(initial: float, maximum: float, *, factor: float = 2.0) -> list[int]:
    """The whole seconds a :class:`Backoff` waits (its base, before jitter), from ``initial`` up to ``maximum``.

    For schedulers that take a list of waits and repeat its last one once the retries outnumber
    it (RQ's ``Retry``): with a practically unbounded ``max`` that is a retry without a cap,
    backing off to one attempt every ``maximum`` seconds.
    """
    backoff = Backoff(initial, maximum, factor=factor)
    waits: list[int] = []
    while True:
        waits.append(max(1, round(backoff.base)))
        if backoff.base >= maximum:
            return waits
        backoff.next_delay()

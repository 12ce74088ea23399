"""Progress on stderr that suits where it goes: redrawn in place on a terminal, plain lines elsewhere.

A ``\\r`` frame per poll is right for a person watching a terminal, and wrong for a log file or a
CI job's output, which would get thousands of frames run together on one line. When the stream
is not a terminal, a line is printed only when the stage changes, at each further 10 %, or
every ``interval_s`` seconds, and the last state when it finishes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TextIO

PLAIN_INTERVAL_S = 5.0


class ProgressLine:
    """One progress display on ``stream`` (``update`` as often as you like, ``finish`` at the end)."""

    def __init__(
        self,
        stream: TextIO,
        *,
        interval_s: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._tty = _isatty(stream)
        self._interval_s = interval_s
        self._clock = clock
        self._width = 0  # of the frame on screen (terminal)
        self._frame_open = False  # a frame is drawn and its line not ended (terminal)
        self._printed: str | None = None  # the last line printed (plain)
        self._printed_at = -math.inf
        self._printed_stage: str | None = None
        self._printed_decile = -1
        self._latest: str | None = None

    @property
    def is_terminal(self) -> bool:
        """Whether frames are redrawn in place."""
        return self._tty

    def update(self, text: str, *, percent: float | None = None, stage: str | None = None) -> None:
        """Show ``text``: redrawn on a terminal; elsewhere printed if the stage changed, a new 10 % was reached
        or ``interval_s`` passed since the last line."""
        self._latest = text
        if self._tty:
            self._stream.write("\r" + text.ljust(self._width))
            self._stream.flush()
            self._width = max(self._width, len(text))
            self._frame_open = True
            return
        decile = -1 if percent is None else int(min(max(percent, 0.0), 100.0) // 10)
        now = self._clock()
        due = (
            self._printed is None
            or stage != self._printed_stage
            or decile > self._printed_decile
            or now - self._printed_at >= self._interval_s
        )
        if due and text != self._printed:
            self._print(text, now)
            self._printed_stage = stage
            self._printed_decile = max(decile, self._printed_decile)

    def note(self, message: str) -> None:
        """A line of its own (a hint, a warning) between updates."""
        self._end_frame()
        self._stream.write(message + "\n")
        self._stream.flush()

    def finish(self) -> None:
        """End the display: the terminal's line is ended; elsewhere the latest state is printed if it was not."""
        if self._tty:
            self._end_frame()
        elif self._latest is not None and self._latest != self._printed:
            self._print(self._latest, self._clock())

    def _print(self, text: str, now: float) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()
        self._printed = text
        self._printed_at = now

    def _end_frame(self) -> None:
        if self._frame_open:
            self._stream.write("\n")
            self._frame_open = False
            self._width = 0


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or bare stream
        return False

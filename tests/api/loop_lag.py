"""The event loop's longest stall while a request is served in-process: what its work on the loop costs everyone.

A task sleeps 10 ms again and again and records how late each wake-up came. Work done on the loop
(a regular expression over a long text, a glossary matched against every text) delays every
wake-up behind it by as long as it runs; work done on a thread delays them only by the few
milliseconds Python takes to hand the loop its turn. The bound the tests hold it to is generous
for a busy machine: the point is that no request's work runs on the loop, not how fast it runs.
"""

from __future__ import annotations

import asyncio
import gc
from types import TracebackType

STALL_BOUND_S = 0.5
"""The longest stall a test allows: far above a thread's turns (milliseconds), far below work on the loop (seconds)."""

_TICK_S = 0.01


class LoopLag:
    """``async with LoopLag() as lag: ...``: ``lag.longest`` is how late the latest 10 ms wake-up came meanwhile."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._asleep_since: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopLag:
        """Start the sleeping task, and let it take its first sleep.

        The heap is collected first: a full collection that earlier tests' objects had made due (a pause of
        every thread, the longer the more objects the test process holds) is not this request's stall.
        """
        gc.collect()
        self._task = asyncio.create_task(self._probe())
        while self._asleep_since is None:
            await asyncio.sleep(0)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Count the sleep still going on (a stall just before the end is one too), then stop the task."""
        if self._asleep_since is not None:
            self._note(asyncio.get_running_loop().time() - self._asleep_since)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _probe(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._asleep_since = loop.time()
            await asyncio.sleep(_TICK_S)
            self._note(loop.time() - self._asleep_since)

    def _note(self, slept: float) -> None:
        self.longest = max(self.longest, slept - _TICK_S)

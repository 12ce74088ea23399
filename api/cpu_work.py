"""Work on a request's content whose cost grows with it, run off the event loop on a few threads of the API's own.

Tagging the markup of a thousand texts, matching them against a glossary of ten thousand terms,
parsing a glossary's CSV, detecting a language: each runs in linear time, but a large request is
still a good fraction of a second of CPU, and on the event loop that is every other request's wait.
:meth:`CpuWork.run` runs such a function on one of :data:`THREADS` threads instead. The threads share
the interpreter with the loop, which Python hands the loop back every few milliseconds
(``sys.getswitchinterval``): the loop's longest stall is that, not the whole work.

The queue is bounded: at most :data:`MAX_WAITING` calls wait for a thread, and one past them is
refused at once (``503 server_busy`` with ``Retry-After``), so a flood of large requests cannot pile
up work that would run long after their clients gave up. A call whose request is cancelled while it
waits never runs; one already running finishes, and its place is given back only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from api.errors import ApiError

P = ParamSpec("P")
T = TypeVar("T")

THREADS = 2
"""Threads doing requests' work: more would not run Python any faster (one interpreter lock), only
take more turns from the event loop; two let a small request's work run beside a large one's."""

MAX_WAITING = 64
"""Calls that may wait for a thread; past them a request is answered 503 at once."""


class CpuWork:
    """The API's threads for per-request work (see the module's docstring), owned by the application."""

    def __init__(self, retry_after_s: int, threads: int = THREADS, max_waiting: int = MAX_WAITING) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="dragoman-request-work")
        self._limit = threads + max_waiting
        self._retry_after_s = retry_after_s
        self._taken = 0  # calls running or waiting: given back when each one's future is done

    async def run(self, function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``function(*args, **kwargs)`` on one of the threads; its result (or its exception).

        Raises ``ApiError(503, "server_busy")`` with ``Retry-After`` when :data:`MAX_WAITING` calls wait already.
        """
        if self._taken >= self._limit:
            raise ApiError(
                503,
                "server_busy",
                f"this server is already working on {self._taken} large requests; retry shortly",
                {"Retry-After": str(self._retry_after_s)},
            )
        loop = asyncio.get_running_loop()
        future: Future[T] = self._executor.submit(functools.partial(function, *args, **kwargs))
        self._taken += 1
        future.add_done_callback(lambda _: self._give_back(loop))
        return await asyncio.wrap_future(future)  # cancelled here: a call still waiting never runs

    def _give_back(self, loop: asyncio.AbstractEventLoop) -> None:
        """A call ended (on its thread, or cancelled while waiting): its place is free, counted on the loop."""

        def free() -> None:
            self._taken -= 1

        with contextlib.suppress(RuntimeError):  # the loop closed at shutdown: nothing is counted any more
            loop.call_soon_threadsafe(free)

    def close(self) -> None:
        """Stop the threads once their current calls end (the application's shutdown); waiting calls are dropped."""
        self._executor.shutdown(wait=False, cancel_futures=True)

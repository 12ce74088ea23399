"""The one bridge from synchronous code to dragoman's asyncio operations: an event loop on a thread of its own.

Every operation (submitting, looking up, runs and documents, the stores behind them) is written
once, as a coroutine. Synchronous callers (``producer.Client``, the CLI, benchmarks) do not get a
second copy: they run the coroutine on a :class:`LoopThread`, whose loop keeps the connections
the coroutines opened (so they are reused from call to call, unlike ``asyncio.run`` per call).
The loop runs on a daemon thread, so a caller may itself be inside another event loop or on any
thread; calls from several threads are served in turn by the one loop.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar, cast

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (a cross-thread call costs about half), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """An asyncio event loop running on a daemon thread, owned by whoever made it; :meth:`close` ends both."""

    def __init__(self, name: str = "dragoman-loop") -> None:
        self._loop = _new_loop()
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the loop and block until it is done; its result, or its exception raised here.

        If the waiting caller is interrupted (Ctrl-C), the coroutine is cancelled too.
        """
        problem = None
        if threading.current_thread() is self._thread:
            problem = "LoopThread.run called from its own loop: await the coroutine instead"
        elif self.closed:
            problem = "this event loop is closed (its owner, a client, was closed): make a new one"
        elif os.getpid() != self._pid:  # a forked child has no copy of the loop's thread: it would wait forever
            problem = "this event loop belongs to the process that made it (before a fork): make one in this process"
        if problem is not None:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never run: no "was never awaited" warning
            raise RuntimeError(problem)

        async def wrapped() -> T:
            return await awaitable

        coroutine = cast(Coroutine[Any, Any, T], awaitable) if inspect.iscoroutine(awaitable) else wrapped()
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def iterate(self, items: AsyncIterator[T]) -> Iterator[T]:
        """``items`` as a synchronous iterator: each item is awaited on the loop when it is asked for."""
        while True:
            try:
                yield self.run(anext(items))
            except StopAsyncIteration:
                return

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._loop.is_closed()

    def close(self) -> None:
        """Stop the loop and its thread (idempotent). Close what the coroutines opened before calling this."""
        if self.closed:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` to completion on a loop of its own, and return its result (``asyncio.run``'s job).

    Unlike ``asyncio.run`` it may be called on a thread whose own loop is running (an RQ task run
    in-process by a worker inside an asyncio application or test): the coroutine runs on a
    :class:`LoopThread` made for it and closed afterwards.
    """
    loop = LoopThread("dragoman-run")
    try:
        return loop.run(awaitable)
    finally:
        loop.close()

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
import concurrent.futures
import inspect
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar, cast

T = TypeVar("T")
_CLOSED = "this event loop is closed (its owner, a client, was closed): make a new one"


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
        self._closing = False
        self._submitting = threading.Lock()  # no call is submitted once close has begun
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the loop and block until it is done; its result, or its exception raised here.

        If the waiting caller is interrupted (Ctrl-C), the coroutine is cancelled too.
        """
        problem = None
        if threading.current_thread() is self._thread:
            problem = "LoopThread.run called from its own loop: await the coroutine instead"
        elif self._closing:
            problem = _CLOSED
        elif os.getpid() != self._pid:  # a forked child has no copy of the loop's thread: it would wait forever
            problem = "this event loop belongs to the process that made it (before a fork): make one in this process"
        if problem is not None:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never run: no "was never awaited" warning
            raise RuntimeError(problem)

        async def wrapped() -> T:
            return await awaitable

        coroutine = cast(Coroutine[Any, Any, T], awaitable) if inspect.iscoroutine(awaitable) else wrapped()
        with self._submitting:
            if self._closing:  # closed since the check above
                coroutine.close()
                raise RuntimeError(_CLOSED)
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if self._closing:
                raise RuntimeError(
                    "this event loop was closed (its owner, a client, was closed) while the call ran"
                ) from None
            raise
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
        """Whether :meth:`close` was called (it may still be cancelling the calls in flight)."""
        return self._closing or self._loop.is_closed()

    def close(self) -> None:
        """Stop the loop and its thread (idempotent). Close what the coroutines opened before calling this.

        Calls still in flight (on other threads) are cancelled first and raise ``RuntimeError`` to
        their callers: a loop stopped under them would leave them waiting forever.
        """
        if self.closed:
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.close called from its own loop: call it from another thread")
        with self._submitting:
            self._closing = True
        if self._thread.is_alive():  # a thread ended by an exception of its own has no loop running to ask
            asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _cancel_the_rest() -> None:
    """Cancel every other task of the running loop and wait for them to end, then close its async generators."""
    loop = asyncio.get_running_loop()
    tasks = [task for task in asyncio.all_tasks(loop) if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await loop.shutdown_asyncgens()


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

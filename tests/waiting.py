"""Waiting in tests for something to happen, never for a wall-clock deadline.

A test that gives a job 10 s to finish fails on a machine busy with other work although nothing
is wrong. These helpers wait until the condition holds, however long that takes; the test's own
``pytest-timeout`` (``[tool.pytest.ini_options] timeout``, or its ``pytest.mark.timeout``) is what
ends a wait for something that never happens, and its report shows the ``what`` being waited for
in the stack. Something that must *not* happen within a while is a different question: those tests
keep their own window.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

POLL_S = 0.05
"""How often a condition is looked at again: short, so a test ends soon after what it waits for."""

FOREVER = 24 * 3600.0
"""The timeout to give an API that needs one (``Client.wait``, ``Popen.wait``) where the test waits for the event
itself: longer than any test's pytest timeout, which is then what ends a wait for something that never happens."""


def wait_for(condition: Callable[[], T], what: str, *, every: float = POLL_S) -> T:
    """Call ``condition`` until it returns something truthy; that value. ``what`` says what is awaited."""
    while True:
        value = condition()
        if value:
            return value
        time.sleep(every)


@overload
async def until(condition: Callable[[], Awaitable[T]], what: str, *, every: float = POLL_S) -> T: ...


@overload
async def until(condition: Callable[[], T], what: str, *, every: float = POLL_S) -> T: ...


async def until(condition: Callable[[], T | Awaitable[T]], what: str, *, every: float = POLL_S) -> T:
    """:func:`wait_for` on an event loop: ``condition`` may be a coroutine function; sleeps without blocking."""
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(every)

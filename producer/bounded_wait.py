"""Wait for an event at most so long, without losing the caller's cancellation.

``with suppress(TimeoutError): async with asyncio.timeout(s): await event.wait()`` loses a cancellation
that was requested while the task was runnable (pending when the timeout is entered) and is delivered as
the timeout expires: ``asyncio.timeout`` takes it for its own and raises ``TimeoutError``, which the
suppress swallows. A door request cancelled by its client then waited out its whole limit (30 s in the
test) with its jobs queued. :func:`wait_at_most` re-raises the cancellation instead.
"""

from __future__ import annotations

import asyncio


async def wait_at_most(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``; a cancellation of the caller is raised, never swallowed."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError from None  # a cancel request outlived the timeout's own
        return False
    return True

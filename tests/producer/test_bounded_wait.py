"""``wait_at_most`` keeps a cancellation that arrives as its time runs out (``asyncio.timeout`` alone loses it)."""

from __future__ import annotations

import asyncio

import pytest

from producer.bounded_wait import wait_at_most


async def test_set_in_time_and_not() -> None:
    event = asyncio.Event()
    assert not await wait_at_most(event, 0.01)
    event.set()
    assert await wait_at_most(event, 0)


async def test_a_cancel_pending_as_the_time_runs_out_is_raised_not_swallowed() -> None:
    """A cancel requested while the waiting task is runnable (here: by itself) and a timeout of 0 expiring in the
    same turn: ``asyncio.timeout`` alone turns the pair into ``TimeoutError``."""
    outcome: list[str] = []

    async def waiter() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # pending: delivered at the next await, inside the wait
        try:
            await wait_at_most(asyncio.Event(), 0)
            outcome.append("returned")
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(waiter())
    assert outcome == ["cancelled"]

"""The API's work threads: results and errors come back, the queue is bounded, a cancelled call never runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from api.cpu_work import CpuWork
from api.errors import ApiError
from tests.waiting import until


async def accepted(work: CpuWork, function: Callable[[str], object], argument: str) -> bool:
    """Whether ``work`` ran ``function(argument)`` (``False``: it answered busy)."""
    try:
        await work.run(function, argument)
    except ApiError:
        return False
    return True


async def test_a_call_answers_its_result_or_its_error() -> None:
    work = CpuWork(retry_after_s=1)
    try:
        assert await work.run(sorted, [3, 1, 2], reverse=True) == [3, 2, 1]
        with pytest.raises(ValueError, match="invalid literal"):
            await work.run(int, "x")
        assert await work.run(threading.current_thread) is not threading.current_thread()
    finally:
        work.close()


async def test_past_the_waiting_calls_a_request_is_answered_busy_at_once() -> None:
    work = CpuWork(retry_after_s=3, threads=1, max_waiting=1)
    started, release = threading.Event(), threading.Event()

    def blocked() -> str:
        started.set()
        release.wait()
        return "done"

    try:
        running = asyncio.create_task(work.run(blocked))
        await until(started.is_set, "the first call running")
        waiting = asyncio.create_task(work.run(str.upper, "queued"))
        await asyncio.sleep(0)
        with pytest.raises(ApiError) as refused:
            await work.run(str.upper, "one too many")
        assert refused.value.status == 503 and refused.value.code == "server_busy"
        assert refused.value.headers == {"Retry-After": "3"}
        release.set()
        assert await running == "done" and await waiting == "QUEUED"
        await until(lambda: accepted(work, str.upper, "room again"), "a place given back")
    finally:
        release.set()
        work.close()


async def test_a_call_cancelled_while_it_waits_never_runs_and_gives_its_place_back() -> None:
    work = CpuWork(retry_after_s=1, threads=1, max_waiting=1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def blocked() -> None:
        started.set()
        release.wait()

    try:
        running = asyncio.create_task(work.run(blocked))
        await until(started.is_set, "the first call running")
        cancelled = asyncio.create_task(work.run(ran.append, "cancelled"))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        release.set()
        await running
        await until(lambda: accepted(work, ran.append, "later"), "a place given back")
        assert ran == ["later"]
    finally:
        release.set()
        work.close()

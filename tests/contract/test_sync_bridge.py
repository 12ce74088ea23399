"""The one sync bridge: coroutines run to completion from synchronous code, inside a running loop too."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import AsyncIterator

import pytest

from contract.sync_bridge import LoopThread, run_sync
from tests.waiting import FOREVER


async def _double(value: int) -> int:
    await asyncio.sleep(0)
    return value * 2


async def _fail() -> None:
    raise LookupError("not here")


async def _count(n: int) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(0)
        yield i


def test_a_loop_thread_runs_coroutines_raises_their_errors_and_iterates() -> None:
    loop = LoopThread("test-loop")
    try:
        assert loop.run(_double(21)) == 42
        with pytest.raises(LookupError, match="not here"):
            loop.run(_fail())
        assert list(loop.iterate(_count(3))) == [0, 1, 2]
        assert [loop.run(_double(i)) for i in range(3)] == [0, 2, 4]  # the same loop, call after call
    finally:
        loop.close()
    loop.close()  # idempotent
    assert loop.closed
    with pytest.raises(RuntimeError, match="closed"):
        loop.run(_double(1))


def test_a_loop_thread_serves_several_threads() -> None:
    loop = LoopThread()
    results: list[int] = []
    threads = [threading.Thread(target=lambda i=i: results.append(loop.run(_double(i)))) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loop.close()
    assert sorted(results) == [2 * i for i in range(8)]


def test_a_forked_child_is_told_to_make_its_own_instead_of_waiting_forever() -> None:
    loop = LoopThread()
    context = multiprocessing.get_context("fork")
    answers = context.Queue()

    def child() -> None:
        try:
            loop.run(_double(1))
            answers.put("ran")
        except RuntimeError as exc:
            answers.put(str(exc))

    process = context.Process(target=child)
    process.start()
    process.join(timeout=FOREVER)
    assert "before a fork" in answers.get(timeout=FOREVER)
    assert loop.run(_double(2)) == 4  # the parent's loop is untouched
    loop.close()


def test_its_own_loop_may_not_block_on_it() -> None:
    loop = LoopThread()

    async def reentrant() -> int:
        return loop.run(_double(1))

    with pytest.raises(RuntimeError, match="its own loop"):
        loop.run(reentrant())
    loop.close()


async def test_run_sync_works_where_asyncio_run_cannot_on_a_thread_with_a_running_loop() -> None:
    refused = _double(1)
    with pytest.raises(RuntimeError, match="running event loop"):
        asyncio.run(refused)  # what an RQ task run in-process by an async caller would hit
    refused.close()
    assert run_sync(_double(4)) == 8


def test_closing_the_loop_while_another_thread_waits_on_it_ends_that_wait() -> None:
    loop = LoopThread("test-loop")
    started = threading.Event()
    outcome: list[BaseException | str] = []

    async def _long() -> str:
        started.set()
        await asyncio.sleep(30)
        return "finished"

    def _call() -> None:
        try:
            outcome.append(loop.run(_long()))
        except BaseException as exc:  # the waiter must be told, whatever the exception
            outcome.append(exc)

    caller = threading.Thread(target=_call, daemon=True)
    caller.start()
    assert started.wait(FOREVER)
    loop.close()
    caller.join(FOREVER)  # a call in flight when the loop closed used to wait forever: the test's timeout then
    assert not caller.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError)
    assert "closed" in str(outcome[0])


def test_a_call_after_close_is_refused_and_close_ends_tasks_left_behind() -> None:
    loop = LoopThread("test-loop")
    cancelled = threading.Event()

    async def _left_behind() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def _spawn() -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(_left_behind())

    loop.run(_spawn())
    loop.close()
    assert cancelled.is_set()
    assert loop.closed
    with pytest.raises(RuntimeError, match="closed"):
        loop.run(_double(1))

""":class:`JoinedRequests`: identical door requests in flight share one piece of work, a client's going away
does not cancel what another waits for, and abandoned work is cancelled after the grace period."""

from __future__ import annotations

import asyncio

import pytest

from api.joined_requests import JoinedRequests, request_key
from contract.schemas import TranslationRequest


class Work:
    """Work that runs until released, counting its starts and noting its cancellation."""

    def __init__(self) -> None:
        self.starts = 0
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self) -> str:
        self.starts += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return f"done {self.starts}"


async def _until_waiting(joined: JoinedRequests, count: int) -> None:
    """Let the waiting tasks reach their wait (each needs the loop's turn)."""
    while len(joined) != count:
        await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_an_identical_request_joins_the_work_in_flight() -> None:
    joined, work = JoinedRequests(grace_s=10), Work()
    first = asyncio.create_task(joined.run(b"k", work))
    await _until_waiting(joined, 1)
    second = asyncio.create_task(joined.run(b"k", work))
    await asyncio.sleep(0)
    work.release.set()
    assert await asyncio.gather(first, second) == ["done 1", "done 1"]
    assert work.starts == 1 and len(joined) == 0
    assert await joined.run(b"k", work) == "done 2"  # finished work is not kept: a later request is new work


async def test_a_client_gone_does_not_cancel_work_a_retry_waits_for() -> None:
    joined, work = JoinedRequests(grace_s=0), Work()
    first = asyncio.create_task(joined.run(b"k", work))
    await _until_waiting(joined, 1)
    retry = asyncio.create_task(joined.run(b"k", work))
    await asyncio.sleep(0)
    first.cancel()  # the first client timed out and disconnected
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not work.cancelled.is_set()
    work.release.set()
    assert await retry == "done 1" and work.starts == 1


async def test_abandoned_work_outlives_its_client_for_the_grace_period_and_a_retry_joins_it() -> None:
    joined, work = JoinedRequests(grace_s=3600), Work()
    first = asyncio.create_task(joined.run(b"k", work))
    await _until_waiting(joined, 1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    retry = asyncio.create_task(joined.run(b"k", work))  # arrives after the first client left, within the grace
    await asyncio.sleep(0)
    work.release.set()
    assert await retry == "done 1" and work.starts == 1 and not work.cancelled.is_set()


@pytest.mark.parametrize("grace_s", [0.0, 0.05])
async def test_work_nobody_waits_for_is_cancelled_after_the_grace(grace_s: float) -> None:
    joined, work = JoinedRequests(grace_s=grace_s), Work()
    first = asyncio.create_task(joined.run(b"k", work))
    await _until_waiting(joined, 1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await work.cancelled.wait()  # its own cancellation handling ran (a door's jobs are cancelled there)
    await _until_waiting(joined, 0)


async def test_a_failure_reaches_every_waiter() -> None:
    joined = JoinedRequests(grace_s=10)
    gate = asyncio.Event()

    async def failing() -> str:
        await gate.wait()
        raise ValueError("item 3: text is empty")

    waiters = [asyncio.create_task(joined.run(b"k", failing)) for _ in range(2)]
    await _until_waiting(joined, 1)
    gate.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert [str(result) for result in results] == ["item 3: text is empty"] * 2


async def test_close_cancels_work_in_flight() -> None:
    joined, work = JoinedRequests(grace_s=3600), Work()
    waiter = asyncio.create_task(joined.run(b"k", work))
    await _until_waiting(joined, 1)
    waiter.cancel()
    await joined.close()
    assert work.cancelled.is_set()


def test_the_key_tells_requests_apart_by_key_texts_and_every_option() -> None:
    base = TranslationRequest(text="Save", source_lang="en", target_lang="de")
    key = request_key("key-1", [base], [False], None)
    assert key == request_key(
        "key-1", [TranslationRequest(text="Save", source_lang="en", target_lang="de")], [False], None
    )
    others = [
        request_key("key-2", [base], [False], None),
        request_key("key-1", [base], [True], None),
        request_key("key-1", [base], [False], 5.0),
        request_key("key-1", [base, base], [False, False], None),
        request_key("key-1", [TranslationRequest(text="Save", source_lang="en", target_lang="fr")], [False], None),
        request_key(
            "key-1",
            [TranslationRequest(text="Save", source_lang="en", target_lang="de", formality="formal")],
            [False],
            None,
        ),
        request_key(
            "key-1",
            [TranslationRequest(text="Save", source_lang="en", target_lang="de", glossary={"a": "b"})],
            [False],
            None,
        ),
    ]
    assert key not in others and len(set(others)) == len(others)

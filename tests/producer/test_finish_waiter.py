"""FinishWaiter on a real Redis: a watched job's completion event wakes its watcher, nothing else does."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

import producer.finish_waiter as module
from broker.keys import RedisKeys
from contract.schemas import JobStatus
from contract.settings import Settings
from contract.wire import JobEvent
from producer.finish_waiter import FinishWaiter
from tests.waiting import FOREVER


def _event(job_id: str) -> str:
    return JobEvent(job_id=job_id, status=JobStatus.SUCCEEDED, finished_at=1.0).to_json()


async def test_the_watched_jobs_event_wakes_its_watcher_and_no_other_message_does(
    settings: Settings, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(settings)
    waiter = FinishWaiter(async_redis, keys)
    try:
        async with waiter.watch(["job-a"], ready_within=5) as finished:
            assert waiter.listening
            await async_redis.publish(keys.events_channel, _event("job-b"))
            await async_redis.publish(keys.events_channel, "not an event")
            assert not await finished.wait_at_most(0.6)
            await async_redis.publish(keys.events_channel, _event("job-a"))
            assert await finished.wait_at_most(FOREVER)
    finally:
        await waiter.close()


async def test_the_subscription_ends_once_nobody_waits(
    settings: Settings, async_redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "IDLE_SECONDS", 0.2)
    keys = RedisKeys.from_settings(settings)
    waiter = FinishWaiter(async_redis, keys)
    try:
        async with waiter.watch(["job-a"], ready_within=5):
            assert waiter.listening
        async with asyncio.timeout(5):
            while waiter.listening:
                await asyncio.sleep(0.05)
        assert await async_redis.pubsub_numsub(keys.events_channel) == [(keys.events_channel, 0)]
        async with waiter.watch(["job-b"], ready_within=5):  # and a later watcher subscribes again
            assert waiter.listening
    finally:
        await waiter.close()


async def test_one_watch_over_many_jobs_hands_over_the_ids_published_since_it_last_looked(
    settings: Settings, async_redis: aioredis.Redis
) -> None:
    keys = RedisKeys.from_settings(settings)
    waiter = FinishWaiter(async_redis, keys)
    try:
        async with waiter.watch(["job-a", "job-b", "job-c"], ready_within=5) as watch:
            for job_id in ("job-a", "job-x", "job-c"):
                await async_redis.publish(keys.events_channel, _event(job_id))
            collected: set[str] = set()
            while collected != {"job-a", "job-c"}:
                assert await watch.wait_at_most(FOREVER)
                collected |= watch.take()
            assert not await watch.wait_at_most(0.3)  # taken: the next wait waits for a new event
        assert waiter._watchers == {}  # the block's end forgets every id it watched
    finally:
        await waiter.close()

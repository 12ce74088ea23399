"""Consumer groups are created once, on a real Redis; a key of the wrong type is refused with the reason."""

from __future__ import annotations

import uuid

import pytest
import redis
import redis.asyncio as aioredis

from broker.consumer_groups import StreamKeyConflictError, ensure_group, ensure_group_async
from contract.errors import ConfigurationError


@pytest.fixture
def stream() -> str:
    return f"groups-{uuid.uuid4().hex}:jobs"


def test_the_group_and_stream_are_created_once(raw_redis: redis.Redis, stream: str) -> None:
    assert ensure_group(raw_redis, stream, "readers") is True
    raw_redis.xadd(stream, {"n": "1"})
    raw_redis.xreadgroup("readers", "one", {stream: ">"})  # moves the group's cursor past the entry

    assert ensure_group(raw_redis, stream, "readers") is False
    [group] = raw_redis.xinfo_groups(stream)
    assert group["name"] == "readers"
    assert group["pending"] == 1  # the group was left as it was, not made again
    raw_redis.delete(stream)


def test_a_new_group_reads_the_stream_from_its_start(raw_redis: redis.Redis, stream: str) -> None:
    raw_redis.xadd(stream, {"n": "1"})
    assert ensure_group(raw_redis, stream, "late") is True
    [(_, entries)] = raw_redis.xreadgroup("late", "one", {stream: ">"})
    assert [fields for _, fields in entries] == [{"n": "1"}]
    raw_redis.delete(stream)


def test_a_key_that_is_not_a_stream_is_refused(raw_redis: redis.Redis, stream: str) -> None:
    raw_redis.set(stream, "someone else's value")
    with pytest.raises(StreamKeyConflictError, match=f"{stream}.*holds a string, not a stream") as caught:
        ensure_group(raw_redis, stream, "readers")
    assert isinstance(caught.value, ConfigurationError)
    assert raw_redis.get(stream) == "someone else's value"
    raw_redis.delete(stream)


async def test_async_the_group_is_created_once(async_redis: aioredis.Redis, stream: str) -> None:
    assert await ensure_group_async(async_redis, stream, "readers") is True
    assert await ensure_group_async(async_redis, stream, "readers") is False
    groups = await async_redis.xinfo_groups(stream)
    assert [group["name"] for group in groups] == ["readers"]
    await async_redis.delete(stream)


async def test_async_a_key_that_is_not_a_stream_is_refused(async_redis: aioredis.Redis, stream: str) -> None:
    await async_redis.rpush(stream, "x")
    with pytest.raises(StreamKeyConflictError, match="holds a list, not a stream"):
        await ensure_group_async(async_redis, stream, "readers")
    await async_redis.delete(stream)

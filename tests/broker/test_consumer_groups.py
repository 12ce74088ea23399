"""Consumer groups are created once, on a real Redis; a key of the wrong type is refused with the reason."""

from __future__ import annotations

import uuid

import pytest
import redis
import redis.asyncio as aioredis

from broker.consumer_groups import StreamKeyConflictError, ensure_group
from contract.errors import ConfigurationError


@pytest.fixture
def stream() -> str:
    return f"groups-{uuid.uuid4().hex}:jobs"


async def test_the_group_and_stream_are_created_once(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, stream: str
) -> None:
    assert await ensure_group(async_redis, stream, "readers") is True
    raw_redis.xadd(stream, {"n": "1"})
    raw_redis.xreadgroup("readers", "one", {stream: ">"})  # moves the group's cursor past the entry

    assert await ensure_group(async_redis, stream, "readers") is False
    [group] = raw_redis.xinfo_groups(stream)
    assert group["name"] == "readers"
    assert group["pending"] == 1  # the group was left as it was, not made again
    raw_redis.delete(stream)


async def test_a_new_group_reads_the_stream_from_its_start(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, stream: str
) -> None:
    raw_redis.xadd(stream, {"n": "1"})
    assert await ensure_group(async_redis, stream, "late") is True
    [(_, entries)] = raw_redis.xreadgroup("late", "one", {stream: ">"})
    assert [fields for _, fields in entries] == [{"n": "1"}]
    raw_redis.delete(stream)


@pytest.mark.parametrize(("value", "kind"), [("string", "string"), ("list", "list")])
async def test_a_key_that_is_not_a_stream_is_refused(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, stream: str, value: str, kind: str
) -> None:
    if value == "string":
        raw_redis.set(stream, "someone else's value")
    else:
        raw_redis.rpush(stream, "x")
    with pytest.raises(StreamKeyConflictError, match=f"{stream}.*holds a {kind}, not a stream") as caught:
        await ensure_group(async_redis, stream, "readers")
    assert isinstance(caught.value, ConfigurationError)
    assert raw_redis.type(stream) == kind  # left as it was
    raw_redis.delete(stream)

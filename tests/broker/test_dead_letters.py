"""The dead-letter stream's reader, on a real Redis: entries written by today's worker and by earlier ones."""

from __future__ import annotations

import redis
import redis.asyncio as aioredis

from broker.dead_letters import DeadLetters
from broker.keys import RedisKeys
from contract.settings import Settings


async def test_when_is_read_from_the_new_field_and_the_old_one(
    raw_redis: redis.Redis, async_redis: aioredis.Redis, settings: Settings
) -> None:
    stream = RedisKeys.from_settings(settings).dead_letter_stream
    raw_redis.xadd(stream, {"id": "a", "reason": "new", "dead_lettered_at": "12.5"})
    raw_redis.xadd(stream, {"id": "b", "reason": "old", "parked_at": "7.25"})  # written before the rename
    raw_redis.xadd(stream, {"id": "c", "reason": "none"})
    letters = DeadLetters(async_redis, settings)
    assert [(e.job_id, e.reason, e.dead_lettered_at) for e in await letters.entries()] == [
        ("a", "new", 12.5),
        ("b", "old", 7.25),
        ("c", "none", None),
    ]
    assert await letters.purge() == 3
    assert await letters.entries() == []

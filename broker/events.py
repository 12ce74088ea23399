"""Reading the events streams (``{<prefix>}:events``, one per shard), which FINISH appends a job's completion to.

Readers (the HTTP API's ``GET /v1/events``) follow them by entry id with plain ``XREAD``: no consumer
group, since every reader wants every entry. FINISH writes a job's event on the shard the job was
read from, so a reader follows every shard's stream (:attr:`~broker.keys.RedisKeys.shards`), one
``XREAD`` per stream: an ``XREAD`` naming streams of two shards is ``CROSSSLOT`` on a Redis Cluster.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from broker.keys import RedisKeys

Entries = list[tuple[str, dict[str, str]]]
"""Stream entries as read: (entry id, fields)."""


async def newest_event_ids(redis: aioredis.Redis, keys: RedisKeys) -> list[str | None]:
    """Each shard's newest events-stream entry id (``None``: empty), shard 0 first, in one pipelined round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for shard in keys.shards:
            pipe.xrevrange(shard.events_stream, count=1)
        replies: list[Any] = await pipe.execute()
    return [str(reply[0][0]) if reply else None for reply in replies]


async def oldest_event_ids(redis: aioredis.Redis, keys: RedisKeys) -> list[str | None]:
    """Each shard's oldest kept entry id (streams are trimmed to ``DRAGOMAN_EVENTS_MAXLEN``; ``None``: empty)."""
    async with redis.pipeline(transaction=False) as pipe:
        for shard in keys.shards:
            pipe.xrange(shard.events_stream, count=1)
        replies: list[Any] = await pipe.execute()
    return [str(reply[0][0]) if reply else None for reply in replies]


async def read_events(redis: aioredis.Redis, shard: RedisKeys, after: str, count: int, block_ms: int) -> Entries:
    """Up to ``count`` entries of ``shard``'s events stream after id ``after``, waiting up to ``block_ms`` for the
    first (``[]``: none came)."""
    reply: Any = await redis.xread({shard.events_stream: after}, count=count, block=block_ms)
    return reply[0][1] if reply else []

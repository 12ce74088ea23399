"""Reading the events streams, which FINISH appends a job's completion to: the shared one
(``{<prefix>}:events``, one per shard, every job's) and each tenant's own (``{<prefix>}:tenant:<t>:events``,
its jobs' alone, trimmed by its own retention: ``broker/scripts/finish.py``).

Readers follow them by entry id with plain ``XREAD``: no consumer group, since every reader wants
every entry. The HTTP API's ``GET /v1/events`` reads its tenant's streams only (``tenant=``), so what
it reads, a replay from the start included, is that tenant's events and no one else's. FINISH
writes a job's event on the shard the job was read from, so a reader follows every shard's stream
(:attr:`~broker.keys.RedisKeys.shards`), one ``XREAD`` per stream: an ``XREAD`` naming streams of two
shards is ``CROSSSLOT`` on a Redis Cluster.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from broker.keys import RedisKeys

Entries = list[tuple[str, dict[str, str]]]
"""Stream entries as read: (entry id, fields)."""


def events_stream(shard: RedisKeys, tenant: str | None) -> str:
    """``shard``'s events stream: ``tenant``'s own, or (``None``) the shared one."""
    return shard.events_stream if tenant is None else shard.tenant_events(tenant)


async def newest_event_ids(redis: aioredis.Redis, keys: RedisKeys, tenant: str | None = None) -> list[str | None]:
    """Each shard's newest entry id of the events stream (``tenant``'s own, or the shared one; ``None``: empty),
    shard 0 first, in one pipelined round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for shard in keys.shards:
            pipe.xrevrange(events_stream(shard, tenant), count=1)
        replies: list[Any] = await pipe.execute()
    return [str(reply[0][0]) if reply else None for reply in replies]


async def oldest_event_ids(redis: aioredis.Redis, keys: RedisKeys, tenant: str | None = None) -> list[str | None]:
    """Each shard's oldest kept entry id of the events stream (``tenant``'s own, trimmed by its retention, or the
    shared one, trimmed to ``DRAGOMAN_EVENTS_MAXLEN``; ``None``: empty)."""
    async with redis.pipeline(transaction=False) as pipe:
        for shard in keys.shards:
            pipe.xrange(events_stream(shard, tenant), count=1)
        replies: list[Any] = await pipe.execute()
    return [str(reply[0][0]) if reply else None for reply in replies]


async def read_events(
    redis: aioredis.Redis, shard: RedisKeys, after: str, count: int, block_ms: int, tenant: str | None = None
) -> Entries:
    """Up to ``count`` entries of ``shard``'s events stream (``tenant``'s own, or the shared one) after id
    ``after``, waiting up to ``block_ms`` for the first (``[]``: none came)."""
    reply: Any = await redis.xread({events_stream(shard, tenant): after}, count=count, block=block_ms)
    return reply[0][1] if reply else []

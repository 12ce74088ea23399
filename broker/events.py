"""Reading the events stream (``{<prefix>}:events``), which FINISH appends a job's completion to.

Readers (the HTTP API's ``GET /v1/events``) follow it by entry id with plain ``XREAD``: no consumer
group, since every reader wants every entry.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from broker.keys import RedisKeys

Entries = list[tuple[str, dict[str, str]]]
"""Stream entries as read: (entry id, fields)."""


async def newest_event_id(redis: aioredis.Redis, keys: RedisKeys) -> str | None:
    """The id of the newest entry of the events stream, or ``None`` if it is empty."""
    newest: Any = await redis.xrevrange(keys.events_stream, count=1)
    return str(newest[0][0]) if newest else None


async def oldest_event_id(redis: aioredis.Redis, keys: RedisKeys) -> str | None:
    """The id of the oldest entry still kept (the stream is trimmed to ``DRAGOMAN_EVENTS_MAXLEN``), or ``None``."""
    oldest: Any = await redis.xrange(keys.events_stream, count=1)
    return str(oldest[0][0]) if oldest else None


async def read_events(redis: aioredis.Redis, keys: RedisKeys, after: str, count: int, block_ms: int) -> Entries:
    """Up to ``count`` entries after id ``after``, waiting up to ``block_ms`` for the first (``[]``: none came)."""
    reply: Any = await redis.xread({keys.events_stream: after}, count=count, block=block_ms)
    return reply[0][1] if reply else []

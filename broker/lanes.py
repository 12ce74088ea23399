"""Reading the jobs lanes as one consumer of the workers' group: ``XREADGROUP``, one or both lanes per call.

What a read asks of each lane is the worker's lane policy's (``worker/lanes.py``); these functions
only send the reads. Replies come as Redis gives them, one ``(stream, entries)`` item per stream
that had entries, so the worker's hot path does no extra copying.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ClusterDownError, ClusterError, SlotNotCoveredError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.keys import RedisKeys

SHARD_UNAVAILABLE: tuple[type[Exception], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    ClusterError,
    SlotNotCoveredError,
    TryAgainError,
)
"""What Redis raises while one shard cannot answer (its server is down, its primary fails over on a Redis
Cluster: redis-py follows ``MOVED`` itself, and raises these once its retries are spent). The worker backs
off that shard only and keeps reading and acknowledging the others."""

Entries = list[tuple[str, dict[str, str]]]
"""Stream entries as read: (entry id, fields)."""
StreamEntries = list[tuple[str, Entries]]
"""An ``XREADGROUP`` reply: (stream, its entries) for each stream that had some."""


async def read_own_pending(
    redis: aioredis.Redis, keys: RedisKeys, consumer: str, stream: str, after: str, count: int
) -> list[tuple[str, dict[str, str] | None]]:
    """The next page (up to ``count``) of entries of ``stream`` already delivered to ``consumer``, after id ``after``
    (``"0"`` from the start).

    An entry whose message was trimmed or deleted comes back with ``None`` fields.
    """
    response: Any = await redis.xreadgroup(keys.consumer_group, consumer, {stream: after}, count=count)
    return response[0][1] if response else []


async def read_new(redis: aioredis.Redis, keys: RedisKeys, consumer: str, counts: Mapping[str, int]) -> StreamEntries:
    """New entries for ``consumer``, up to ``counts[stream]`` of each stream, without waiting: one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for stream, count in counts.items():
            pipe.xreadgroup(keys.consumer_group, consumer, {stream: ">"}, count=count)
        responses: list[Any] = await pipe.execute()
    return [item for response in responses if response for item in response]


async def wait_for_new(
    redis: aioredis.Redis, keys: RedisKeys, consumer: str, streams: Sequence[str], count: int, block_ms: int
) -> StreamEntries:
    """New entries of any of ``streams`` (up to ``count`` of each), waiting up to ``block_ms`` for the first."""
    response: Any = await redis.xreadgroup(
        keys.consumer_group, consumer, dict.fromkeys(streams, ">"), count=count, block=block_ms
    )
    return response or []

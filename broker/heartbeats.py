"""Workers' heartbeats: a hash per live worker that expires when it stops beating.

A worker writes what it is doing (for operators: ``dragoman check``, ``dragoman stats``) every
:data:`HEARTBEAT_INTERVAL_S`; the key expires :data:`HEARTBEAT_TTL_S` after the last write, and
the other workers take over the jobs of a consumer without one (``broker.pending.claim_orphans``).
Heartbeats are untagged keys: no script touches them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from broker.keys import RedisKeys

HEARTBEAT_INTERVAL_S = 5.0
"""How often a worker refreshes its heartbeat key."""
HEARTBEAT_TTL_S = 15
"""How long a heartbeat key outlives its last refresh: a worker silent that long is taken for dead."""


async def write_heartbeat(
    redis: aioredis.Redis, keys: RedisKeys, consumer: str, fields: Mapping[str, str | int | float]
) -> None:
    """Write ``consumer``'s heartbeat fields and give the key :data:`HEARTBEAT_TTL_S`, in one MULTI/EXEC."""
    key = keys.worker(consumer)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping=dict[Any, Any](fields))
        pipe.expire(key, HEARTBEAT_TTL_S)
        await pipe.execute()


async def delete_heartbeat(redis: aioredis.Redis, keys: RedisKeys, consumer: str) -> None:
    """Delete ``consumer``'s heartbeat (a worker that stopped: its leftovers are taken over at once)."""
    await redis.delete(keys.worker(consumer))


async def beating(redis: aioredis.Redis, keys: RedisKeys, consumers: Sequence[str]) -> list[bool]:
    """Whether each of ``consumers`` has a live heartbeat, in one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for name in consumers:
            pipe.exists(keys.worker(name))
        return [bool(alive) for alive in await pipe.execute()]


async def model_has_live_worker(redis: aioredis.Redis, keys: RedisKeys, model: str) -> bool:
    """Whether a consumer of ``model``'s lanes has a live heartbeat: O(its consumers), never a scan of the keys.

    A worker joins its lanes' consumer group on its first read, so one that started a moment ago may
    not count yet; a model whose lanes or group do not exist has none.
    """
    names: set[str] = set()
    for _, stream in keys.for_model(model).lanes:
        try:
            names.update(_text(info["name"]) for info in await redis.xinfo_consumers(stream, keys.consumer_group))
        except ResponseError:  # no stream or no group yet: no worker of this model ever read it
            continue
    return any(await beating(redis, keys, sorted(names))) if names else False


async def read_heartbeats(redis: aioredis.Redis, keys: RedisKeys) -> dict[str, dict[str, str]]:
    """Every live worker's heartbeat fields, by consumer name (a scan: for operators, never the hot path)."""
    found: dict[str, dict[str, str]] = {}
    prefix = keys.worker("")
    async for key in redis.scan_iter(match=keys.worker_pattern, count=1000):
        beat = await redis.hgetall(key)
        if beat:
            found[_text(key).removeprefix(prefix)] = {_text(k): _text(v) for k, v in beat.items()}
    return found


async def read_heartbeat(redis: aioredis.Redis, keys: RedisKeys, consumer: str) -> dict[str, str]:
    """One worker's heartbeat fields (empty when it has none): O(1), for a caller that knows the consumer name."""
    beat = await redis.hgetall(keys.worker(consumer))
    return {_text(k): _text(v) for k, v in beat.items()}


async def any_heartbeat(redis: aioredis.Redis, keys: RedisKeys) -> bool:
    """Whether at least one worker has a live heartbeat."""
    async for _ in redis.scan_iter(match=keys.worker_pattern, count=100):
        return True
    return False


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

"""Per-key request counters in fixed windows (untagged keys: no script touches them), shared by every API server."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from broker.keys import RedisKeys


@dataclass(frozen=True, slots=True)
class WindowCount:
    """One request counted: the window's count so far, and whether the key is revoked."""

    count: int
    revoked: bool


async def count_request(
    redis: aioredis.Redis, keys: RedisKeys, api_key_id: str, window: int, window_s: int
) -> WindowCount:
    """Count one request of ``api_key_id`` in ``window`` (lasting ``window_s``) and read the key's revocation
    marker: one pipelined round trip, no transaction (the counter and the marker are in different Redis
    Cluster slots, which a MULTI/EXEC may not span)."""
    key = keys.rate_window(api_key_id, window)
    async with redis.pipeline(transaction=False) as pipe:
        # The window's counter is created with its expiry (SET NX EX), then counted: it can never be left
        # without one, whatever happens between the commands, and goes at most a window after its last use.
        pipe.set(key, 0, ex=window_s + 1, nx=True)
        pipe.incr(key)
        pipe.exists(keys.revoked_api_key(api_key_id))
        _, count, revoked = await pipe.execute()
    return WindowCount(int(count), bool(revoked))

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
    marker: one MULTI/EXEC round trip."""
    key = keys.rate_window(api_key_id, window)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.incr(key)
        # Refreshed on every hit (EXPIRE NX needs Redis 7; the embedded server is 6.2): the
        # window's key is never used after the window, so it goes at most a window later.
        pipe.expire(key, window_s + 1)
        pipe.exists(keys.revoked_api_key(api_key_id))
        count, _, revoked = await pipe.execute()
    return WindowCount(int(count), bool(revoked))

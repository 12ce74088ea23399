"""Request counters in fixed windows (untagged keys: no script touches them), shared by every API server: each API
key's requests, and each client address's tries with keys that are not valid."""

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


async def count_unknown_key(redis: aioredis.Redis, keys: RedisKeys, address: str, window: int, window_s: int) -> int:
    """Count one try of ``address`` with a key that is not valid, in ``window`` (lasting ``window_s``); the window's
    count so far. Created with its expiry, as :func:`count_request`'s counter is."""
    key = keys.unknown_key_window(address, window)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.set(key, 0, ex=window_s + 1, nx=True)
        pipe.incr(key)
        _, count = await pipe.execute()
    return int(count)


async def unknown_key_count(redis: aioredis.Redis, keys: RedisKeys, address: str, window: int) -> int:
    """How many tries with keys that are not valid ``address`` made in ``window`` so far (0: none)."""
    count = await redis.get(keys.unknown_key_window(address, window))
    return int(count or 0)

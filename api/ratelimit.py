"""Per-key request rate limit: a fixed-window counter in Redis, shared by every API server.

One ``INCR`` and ``EXPIRE`` per request, in one round trip. A
fixed window lets a key make up to twice its limit across a window boundary; that is the price
of one counter per key and window instead of a sorted set per key.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from contract.keys import RedisKeys

WINDOW_SECONDS = 60


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether one request may go ahead, and if not, how many seconds until the window resets."""

    allowed: bool
    retry_after: int


class RateLimiter:
    """Counts each key's requests per minute in Redis (key names from ``contract.keys``)."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys) -> None:
        self._redis = redis_client
        self._keys = keys

    async def hit(self, api_key_id: str, limit_per_minute: int, now: float | None = None) -> RateDecision:
        """Count one request of ``api_key_id``; refuse it once the window holds more than ``limit_per_minute``."""
        now = time.time() if now is None else now
        window = int(now // WINDOW_SECONDS)
        key = self._keys.rate_window(api_key_id, window)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            # Refreshed on every hit (EXPIRE NX needs Redis 7; the embedded server is 6.2): the
            # window's key is never used after the window, so it goes at most a minute later.
            pipe.expire(key, WINDOW_SECONDS + 1)
            count, _ = await pipe.execute()
        if int(count) <= limit_per_minute:
            return RateDecision(True, 0)
        return RateDecision(False, max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)))

"""Per-key request rate limit: a fixed-window counter in Redis, shared by every API server.

One ``INCR`` and ``EXPIRE`` per request (and the key's revocation marker), in one round trip. A
fixed window lets a key make up to twice its limit across a window boundary; that is the price
of one counter per key and window instead of a sorted set per key.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.rate_windows import count_request

WINDOW_SECONDS = 60


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether one request may go ahead (if not, the seconds until the window resets, or that its key was revoked)."""

    allowed: bool
    retry_after: int
    revoked: bool = False


class RateLimiter:
    """Counts each key's requests per minute in Redis (key names from ``broker.keys``)."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys) -> None:
        self._redis = redis_client
        self._keys = keys

    async def hit(self, api_key_id: str, limit_per_minute: int, now: float | None = None) -> RateDecision:
        """Count one request of ``api_key_id``; refuse it once the window holds more than ``limit_per_minute``.

        The same round trip reads the key's revocation marker (``api.key_cache``).
        """
        now = time.time() if now is None else now
        window = int(now // WINDOW_SECONDS)
        counted = await count_request(self._redis, self._keys, api_key_id, window, WINDOW_SECONDS)
        if counted.revoked:
            return RateDecision(False, 0, revoked=True)
        if counted.count <= limit_per_minute:
            return RateDecision(True, 0)
        return RateDecision(False, max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)))

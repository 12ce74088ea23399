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
    """Whether one request may go ahead (if not, the seconds until the window resets, or that its key was revoked).

    ``queued``: the tenant's unfinished jobs as counted in the same round trip (when asked for).
    """

    allowed: bool
    retry_after: int
    revoked: bool = False
    queued: int | None = None


class RateLimiter:
    """Counts each key's requests per minute in Redis (key names from ``broker.keys``)."""

    def __init__(self, redis_client: aioredis.Redis, keys: RedisKeys) -> None:
        self._redis = redis_client
        self._keys = keys

    async def hit(
        self, api_key_id: str, limit_per_minute: int, now: float | None = None, *, tenant: str | None = None
    ) -> RateDecision:
        """Count one request of ``api_key_id``; refuse it once the window holds more than ``limit_per_minute``.

        The same round trip reads the key's revocation marker (``api.key_cache``) and, given its
        ``tenant``, the tenant's unfinished-job count (informative: admission counts again, atomically,
        ``tenancy.queued_limit``).
        """
        now = time.time() if now is None else now
        window = int(now // WINDOW_SECONDS)
        counted = await count_request(self._redis, self._keys, api_key_id, window, WINDOW_SECONDS, tenant)
        count, revoked, tenant_queued = counted.count, counted.revoked, counted.tenant_queued
        if revoked:
            return RateDecision(False, 0, revoked=True)
        if count <= limit_per_minute:
            return RateDecision(True, 0, queued=tenant_queued)
        return RateDecision(False, max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)), queued=tenant_queued)

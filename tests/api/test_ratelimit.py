"""The fixed-window rate limit on the real Redis: per key, per minute, Retry-After to the window's end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from api.ratelimit import WINDOW_SECONDS, RateLimiter
from broker.keys import RedisKeys
from broker.rate_windows import count_request
from broker.redis_client import open_redis
from contract.services import ServiceUrls
from contract.settings import Settings


@pytest.fixture
async def limiter(service_urls: ServiceUrls, settings: Settings) -> AsyncIterator[tuple[RateLimiter, aioredis.Redis]]:
    client = aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True)
    yield RateLimiter(client, RedisKeys.from_settings(settings)), client
    await client.aclose()


async def test_a_window_counts_to_its_limit_then_refuses_until_it_ends(
    limiter: tuple[RateLimiter, aioredis.Redis], settings: Settings
) -> None:
    rate, client = limiter
    start = 1_800_000_000 - 1_800_000_000 % WINDOW_SECONDS  # the first second of a window
    assert [(await rate.hit("k1", 3, now=start + 10)).allowed for _ in range(3)] == [True] * 3
    refused = await rate.hit("k1", 3, now=start + 10.5)
    assert not refused.allowed and refused.retry_after == WINDOW_SECONDS - 10
    assert (await rate.hit("k2", 3, now=start + 10)).allowed  # another key has its own count
    assert (await rate.hit("k1", 3, now=start + WINDOW_SECONDS)).allowed  # the next window starts afresh
    last = await rate.hit("k1", 1, now=start + WINDOW_SECONDS + 59.9)
    assert not last.allowed and last.retry_after == 1  # never 0: a client must wait at least a second
    key = RedisKeys.from_settings(settings).rate_window("k1", start // WINDOW_SECONDS)
    assert 0 < await client.ttl(key) <= WINDOW_SECONDS + 1  # windows do not pile up in Redis


async def test_a_request_is_counted_on_a_redis_cluster(cluster_settings: Settings) -> None:
    """The window's counter and the revoked-key marker are in different cluster slots: no transaction spans them."""
    assert cluster_settings.redis_url
    client = open_redis(cluster_settings.redis_url)
    keys = RedisKeys.from_settings(cluster_settings)
    try:
        counts = [await count_request(client, keys, "key-1", 7, 60) for _ in range(3)]
        await client.set(keys.revoked_api_key("key-1"), "1")
        revoked = await count_request(client, keys, "key-1", 7, 60)
        assert 0 < await client.ttl(keys.rate_window("key-1", 7)) <= 61
    finally:
        await client.aclose()
    assert [c.count for c in counts] == [1, 2, 3] and not any(c.revoked for c in counts)
    assert revoked.count == 4 and revoked.revoked
